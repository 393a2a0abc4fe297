#!/usr/bin/env bash
# Makes the pinned environments for the libraries built for Gaudi whose last
# releases need older versions than the base Python has:
#   lightning       lightning-habana 1.6.0 + pytorch-lightning 2.3.3 (+ setuptools<81:
#                   its lightning_fabric declares a pkg_resources namespace)
#   optimum-habana  optimum-habana 1.21.2 + transformers 4.55.x,
#                   accelerate 1.7-1.10.1, optimum 2.0.x, torchvision 0.28.0
#   vision          torchvision 0.28.0 (the release for torch 2.13; PyPI's
#                   wheel is built for the CUDA torch, so it stays out of the
#                   base Python, where its failing import would break
#                   transformers; habana_torch makes it import here)
# Each is a venv made with --system-site-packages over the base Python, so it
# uses the base torch 2.13.0 and the habana_torch that scripts/setup.sh built
# from this tree (building it again per venv would cost ~10 CPU-minutes and
# could drift from the tree); pip gets a constraint pinning torch==2.13.0, and
# the script checks afterwards that the venv's torch is still the base one.
# Into each venv goes the habana-torch-plugin compatibility marker built from
# python/compat/habana_torch_plugin (its version is GAUDI_API_VERSION).
#
#   scripts/pinned_envs.sh [lightning|optimum-habana|vision ...]   (default: all)
# Environments go in $HPU_PINNED_ENVS (default ~/.cache/habana_torch/pinned-envs,
# outside the checkout so a fresh clone on the same machine reuses them); one
# whose requirements, marker version and base torch are unchanged is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PYTHON:-python3}
ENVS_DIR=${HPU_PINNED_ENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/habana_torch/pinned-envs}

declare -A REQS=(
  [lightning]="lightning-habana==1.6.0 pytorch-lightning==2.3.3 setuptools<81"
  [optimum-habana]="optimum-habana==1.21.2 transformers>=4.55,<4.56 accelerate>=1.7,<=1.10.1 optimum>=2.0,<2.1 torchvision==0.28.0"
  [vision]="torchvision==0.28.0"
)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(lightning optimum-habana vision)

base_torch=$($PY -c "import torch; print(torch.__version__)")
case "$base_torch" in
  2.13.0*) ;;
  *) echo "pinned_envs: the base Python has torch $base_torch, not 2.13.0 (run scripts/setup.sh)" >&2; exit 1 ;;
esac
marker_version=$($PY -c "import ast,sys; t=ast.parse(open('python/habana_torch/version.py').read()); \
print([ast.literal_eval(n.value) for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == 'GAUDI_API_VERSION'][0])")

mkdir -p "$ENVS_DIR"
constraints="$ENVS_DIR/constraints.txt"
echo "torch==2.13.0" > "$constraints"

for name in "${names[@]}"; do
  reqs=${REQS[$name]:-}
  if [ -z "$reqs" ]; then echo "pinned_envs: unknown environment '$name' (know: ${!REQS[*]})" >&2; exit 2; fi
  venv="$ENVS_DIR/$name"
  stamp="$reqs | habana-torch-plugin==$marker_version | torch $base_torch | $($PY -c 'import sys; print(sys.executable, sys.version.split()[0])')"
  if [ -f "$venv/.pinned" ] && [ "$(cat "$venv/.pinned")" = "$stamp" ]; then
    echo "== pinned env $name: up to date ($venv)"
    continue
  fi
  echo "== pinned env $name: $reqs"
  rm -rf "$venv"
  $PY -m venv --system-site-packages "$venv"
  # shellcheck disable=SC2086  # the requirement list is split on purpose
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$constraints" $reqs
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
    ./python/compat/habana_torch_plugin
  rm -rf python/compat/habana_torch_plugin/build python/compat/habana_torch_plugin/*.egg-info
  # The venv must hold no torch of its own and import the base one.
  if compgen -G "$venv/lib/python*/site-packages/torch" >/dev/null; then
    echo "pinned_envs: pip installed a torch into $venv; refusing it" >&2; exit 1
  fi
  venv_torch=$("$venv/bin/python" -c "import torch; print(torch.__version__)")
  if [ "$venv_torch" != "$base_torch" ]; then
    echo "pinned_envs: $venv imports torch $venv_torch, not the base $base_torch" >&2; exit 1
  fi
  got=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('habana-torch-plugin'))")
  [ "$got" = "$marker_version" ] || { echo "pinned_envs: habana-torch-plugin is $got, want $marker_version" >&2; exit 1; }
  echo "$stamp" > "$venv/.pinned"
  echo "   ready: torch $venv_torch (base), habana-torch-plugin $got"
done
