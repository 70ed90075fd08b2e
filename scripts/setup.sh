#!/usr/bin/env bash
# Set up a fresh Debian 12 machine for relax_edge: the Debian packages listed in
# shared toolchain notes (cross compilers, QEMU, clang/LLVM, bare-metal ARM,
# Vulkan on the CPU, sshd, adb), then a Python virtual environment in .venv with
# relax_edge installed editable plus its dev extra.
#
# Idempotent: packages already installed are skipped (a second run takes
# seconds). Set RXE_SKIP_APT=1 to skip the Debian part (no root, or done already).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RXE_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"

say() { printf '[setup] %s\n' "$*"; }

DEBIAN_PACKAGES=(
  # build basics
  build-essential cmake
  # emulators
  qemu-user qemu-system-arm
  # Linux cross compilers and their libc headers
  gcc-aarch64-linux-gnu gcc-riscv64-linux-gnu gcc-arm-linux-gnueabihf
  libc6-dev-arm64-cross libc6-dev-riscv64-cross libc6-dev-armhf-cross
  # clang / LLVM (lld-19 links riscv64), sanitizer and fuzzer runtimes
  clang lld llvm lld-19 libclang-rt-14-dev
  # bare-metal Cortex-M
  gcc-arm-none-eabi picolibc-arm-none-eabi
  # Vulkan on the CPU (lavapipe), and the validation layer the Vulkan tests enable
  mesa-vulkan-drivers libvulkan-dev glslc spirv-tools vulkan-tools vulkan-validationlayers
  # a real sshd on loopback for the remote harness tests; adb for phones
  openssh-server adb
  # a JDK: jni.h for the JNI glue, javac and java for its host tests (tests/android)
  openjdk-17-jdk-headless
)

install_debian_packages() {
  if [ "${RXE_SKIP_APT:-0}" = "1" ]; then
    say "RXE_SKIP_APT=1: skipping Debian packages"
    return
  fi
  local missing=()
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    say "Debian packages: all ${#DEBIAN_PACKAGES[@]} present"
    return
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
      say "missing Debian packages and not root: ${missing[*]}"
      say "install them as root, or rerun with RXE_SKIP_APT=1"
      exit 1
    fi
  fi
  say "installing ${#missing[@]} Debian packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

setup_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV"
    "$PYTHON" -m venv "$VENV"
  else
    say "virtual environment $VENV exists"
  fi
  local stamp="$VENV/.rxe-installed"
  local digest
  digest="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$digest" ]; then
    say "python packages up to date"
    return
  fi
  say "installing relax_edge (editable) with its dev extra"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e "$ROOT[dev]"
  echo "$digest" > "$stamp"
}

install_debian_packages
setup_python
say "done: activate with 'source $VENV/bin/activate'"
