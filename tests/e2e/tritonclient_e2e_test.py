#!/usr/bin/env python3
"""Triton's own Python client (tritonclient[grpc], from PyPI) against fuserank-server.

Creates (once) a virtual environment with tritonclient[grpc] under the build directory,
starts the real fuserank-server on a loopback port with a generated model served under a
`models:` name, and checks through tritonclient: liveness, readiness, server and model
metadata, ModelConfig, RepositoryIndex; a ranked call whose scores equal Rank's bit for
bit; error cases (a tensor of the wrong datatype, an unknown model). It also checks that
every message, field number and RPC of proto/inference/*.proto is the one tritonclient's
own generated protocol has (wire compatibility).

usage: tritonclient_e2e_test.py --bin BUILD/bin --venv BUILD/venv-tritonclient --source SRC
Exit 0: passed; 1: failed (a pip failure included); 77: skipped, only when
FUSERANK_OFFLINE=1 and tritonclient cannot be installed.
"""

import argparse
import os
import shutil
import subprocess
import sys

PIP_SPEC = "tritonclient[grpc]"


def log(message):
    print(f"tritonclient_e2e_test: {message}", flush=True)


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def has_tritonclient(venv):
    python = venv_python(venv)
    return os.path.exists(python) and subprocess.run(
        [python, "-c", "import tritonclient.grpc, numpy"], capture_output=True).returncode == 0


def interpreters():
    """Pythons that may create the venv: the one first on PATH, then Debian's."""
    seen = []
    for candidate in [os.environ.get("FUSERANK_VENV_PYTHON"), shutil.which("python3"),
                      "/usr/bin/python3"]:
        if candidate and os.path.exists(candidate) and candidate not in seen:
            seen.append(candidate)
    return seen


def create_venv(venv):
    """Creates `venv` with pip, or returns the errors of every interpreter tried."""
    errors = []
    for python in interpreters():
        shutil.rmtree(venv, ignore_errors=True)
        done = subprocess.run([python, "-m", "venv", venv], capture_output=True, text=True)
        if done.returncode == 0 and os.path.exists(os.path.join(venv, "bin", "pip")):
            return None
        errors.append(f"{python} -m venv {venv}: {done.stderr.strip() or 'no pip in the venv'}")
    return "\n".join(errors) or "no python3 found to create the venv"


def offline_skip_or_fail(what):
    if os.environ.get("FUSERANK_OFFLINE") == "1":
        log(f"SKIPPED (FUSERANK_OFFLINE=1): {what}")
        return 77
    log(f"FAILED: {what}")
    return 1


def ensure_venv(venv):
    if has_tritonclient(venv):
        return 0
    log(f"creating {venv} with {PIP_SPEC}")
    error = create_venv(venv)
    if error:
        return offline_skip_or_fail(f"cannot create the venv:\n{error}")
    pip = subprocess.run([venv_python(venv), "-m", "pip", "install", "--quiet", PIP_SPEC],
                         capture_output=True, text=True)
    if pip.returncode != 0:
        return offline_skip_or_fail(f"pip install {PIP_SPEC} failed (exit {pip.returncode}):\n"
                                    f"{pip.stdout}{pip.stderr}")
    if not has_tritonclient(venv):
        return offline_skip_or_fail(f"pip installed {PIP_SPEC} but it does not import")
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
    body = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tritonclient_checks.py")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([venv_python(os.path.abspath(args.venv)), body, "--bin", args.bin,
                           "--source", args.source], env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
