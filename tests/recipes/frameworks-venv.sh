#!/usr/bin/env bash
# Build a virtual environment holding the real PyTorch Lightning and Hugging Face transformers trainers,
# for integration tests of sysprof.integrations (tests/test_integrations_*.py).
#
# Usage: frameworks-venv.sh DIR        (then DIR/bin/python -c 'import lightning, transformers')
#
# torch is the CPU build 2.13.0 on this machine's disk (pip's find-links); lightning and transformers come
# from the package index. A constraints file pins torch==2.13.0 for every later install, so neither
# library's requirements can pull in another (CUDA) torch: pip fails rather than replace it. The script
# checks the torch version at the end. sysprof itself is installed into DIR by the tests (pip install .).
set -euo pipefail
dir=${1:?usage: frameworks-venv.sh DIR}
check='import lightning, transformers, torch; assert torch.__version__.startswith("2.13.0"), torch.__version__'
if [ -x "$dir/bin/python" ] && "$dir/bin/python" -c "$check" 2>/dev/null; then
  echo "frameworks venv ready: $dir"; exit 0
fi
python3 -m venv "$dir"
pin="$dir/torch-pin.txt"
echo 'torch==2.13.0' > "$pin"
pip=("$dir/bin/python" -m pip install -q --disable-pip-version-check -c "$pin")
"${pip[@]}" torch==2.13.0
"${pip[@]}" lightning==2.6.6 transformers==5.24.0 accelerate==1.15.0 psutil numpy
"$dir/bin/python" -c "$check"'
print("lightning", lightning.__version__, "transformers", transformers.__version__, "torch", torch.__version__)'
