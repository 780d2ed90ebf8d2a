"""The machine a benchmark ran on, for the lines its report writes. Standard library only;
the bench scripts' inline Python imports it from the repository root."""
import platform


def cpu_model() -> str:
    """/proc/cpuinfo's model name, else what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
