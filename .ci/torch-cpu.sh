# torch-cpu.sh: sourced by .ci/fetch-model.sh and bench/embed/setup-python.sh.
#
# cpu_torch_wheel PYTHON PATTERN: print the first wheel matching PATTERN (e.g.
# 'torch-2.13.0+cpu-cp311-*.whl') in the local folders pip is configured to look in (find-links,
# from PIP_FIND_LINKS or pip's configuration files), or nothing. Installing that file by path keeps
# pip from resolving torch to a CUDA build of several GB.
cpu_torch_wheel() {
  local python="$1" pattern="$2" links dir w
  links="${PIP_FIND_LINKS:-} $("$python" -m pip config get global.find-links 2>/dev/null || true)"
  for dir in $links; do
    dir="${dir#file://}"
    [[ -d "$dir" ]] || continue
    for w in "$dir"/$pattern; do
      [[ -f "$w" ]] && { echo "$w"; return 0; }
    done
  done
  return 0
}
