#!/usr/bin/env bash
# Installs Tesseract with its English data on a Debian/Ubuntu host, idempotently, for OCR of
# scanned PDF pages (src/ingestion/ocr.ts turns OCR on when the binary is on the PATH). More
# languages: add tesseract-ocr-<lang> packages and name them in OCR_LANGUAGES (e.g. eng+deu).
# Call it from .ci/run before `npm test`; it needs root (or sudo).
set -euo pipefail

packages=(tesseract-ocr tesseract-ocr-eng)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Fail early if the binary cannot run or lacks its English data.
tesseract --list-langs 2>/dev/null | grep -qx eng || {
  echo "ocr-deps: tesseract has no 'eng' traineddata" >&2
  exit 1
}
echo "ocr-deps: $(tesseract --version 2>/dev/null | head -n1), languages: $(tesseract --list-langs 2>/dev/null | tail -n +2 | tr '\n' ' ')" >&2
