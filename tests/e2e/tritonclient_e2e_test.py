#!/usr/bin/env python3
"""Triton's own Python client (tritonclient[grpc], from PyPI) against fuserank-server.

Creates (once) a virtual environment with tritonclient[grpc] under the build directory,
starts the real fuserank-server on a loopback port with a generated model served under a
`models:` name, and checks through tritonclient: liveness, readiness, server and model
metadata, ModelConfig, RepositoryIndex; a ranked call whose scores equal Rank's bit for
bit; error cases (a tensor of the wrong datatype, an unknown model). It also checks that
every message, field number and RPC of proto/inference/*.proto is the one tritonclient's
own generated protocol has (wire compatibility).

The venv is made by Debian's /usr/bin/python3 (python3-venv, which scripts/install-deps.sh
installs), whatever python3 is first on PATH, and filled from PyPI with the versions pinned
in tritonclient_requirements.txt beside this file (wheels only), so a new upstream release
cannot change what the test runs. A venv made from other pins or by another interpreter is
made again. PyPI must be reachable the first time (pip honours PIP_INDEX_URL for a mirror).

usage: tritonclient_e2e_test.py --bin BUILD/bin --venv BUILD/venv-tritonclient --source SRC
Exit 0: passed; 1: failed (a venv or pip failure included); 77: skipped, only when
FUSERANK_OFFLINE=1 and the venv cannot be made or filled.
"""

import argparse
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(HERE, "tritonclient_requirements.txt")
PYTHON = "/usr/bin/python3"  # Debian's, never PATH's: the venv must not depend on pyenv
STAMP = "fuserank-venv.txt"  # in the venv: the interpreter and pins it was made from


def log(message):
    print(f"tritonclient_e2e_test: {message}", flush=True)


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def wanted_stamp():
    with open(REQUIREMENTS, encoding="utf-8") as f:
        return f"python: {PYTHON}\n{f.read()}"


def venv_is_current(venv):
    """The venv was filled from today's pins by PYTHON, and tritonclient imports."""
    try:
        with open(os.path.join(venv, STAMP), encoding="utf-8") as f:
            if f.read() != wanted_stamp():
                return False
    except OSError:
        return False
    return subprocess.run([venv_python(venv), "-c", "import tritonclient.grpc, numpy"],
                          capture_output=True).returncode == 0


def offline_skip_or_fail(what):
    if os.environ.get("FUSERANK_OFFLINE") == "1":
        log(f"SKIPPED (FUSERANK_OFFLINE=1): {what}")
        return 77
    log(f"FAILED: {what}")
    return 1


def ensure_venv(venv):
    if venv_is_current(venv):
        return 0
    log(f"creating {venv} with {PYTHON} and the pins of {os.path.basename(REQUIREMENTS)}")
    shutil.rmtree(venv, ignore_errors=True)
    if not os.path.exists(PYTHON):
        return offline_skip_or_fail(f"no {PYTHON} (Debian's python3) to create the venv")
    made = subprocess.run([PYTHON, "-m", "venv", venv], capture_output=True, text=True)
    if made.returncode != 0 or not os.path.exists(os.path.join(venv, "bin", "pip")):
        return offline_skip_or_fail(
            f"{PYTHON} -m venv {venv} failed (is python3-venv installed? "
            f"scripts/install-deps.sh installs it): {made.stderr.strip() or 'no pip in the venv'}")
    pip = subprocess.run([venv_python(venv), "-m", "pip", "install", "--quiet",
                          "--disable-pip-version-check", "--only-binary=:all:",
                          "-r", REQUIREMENTS], capture_output=True, text=True)
    if pip.returncode != 0:
        return offline_skip_or_fail(f"pip install -r {REQUIREMENTS} failed (exit "
                                    f"{pip.returncode}; PyPI unreachable?):\n"
                                    f"{pip.stdout}{pip.stderr}")
    with open(os.path.join(venv, STAMP), "w", encoding="utf-8") as f:
        f.write(wanted_stamp())
    if not venv_is_current(venv):
        return offline_skip_or_fail(f"pip installed {REQUIREMENTS} but tritonclient does not import")
    return 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--venv", required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args(argv)
    status = ensure_venv(os.path.abspath(args.venv))
    if status != 0:
        return status
    body = os.path.join(HERE, "tritonclient_checks.py")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([venv_python(os.path.abspath(args.venv)), body, "--bin", args.bin,
                           "--source", args.source], env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
