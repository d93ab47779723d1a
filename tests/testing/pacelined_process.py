"""The real pacelined as a child process, for Python integration tests.

The Python sibling of daemon_process.h: started with a command line, ready
once its stderr says "pacelined: ready", its addresses read from the lines
before that, signalled and reaped by the test. Its stderr is drained by a
thread into memory, so the daemon never blocks on it.

    daemon = PacelinedProcess(PACELINED, ["--model", M, "--listen", "127.0.0.1:0", ...])
    daemon.address          # gRPC HOST:PORT ("listening on")
    daemon.port(r"http on \\S+:(\\d+)")   # any port the daemon printed
    daemon.terminate()      # SIGTERM, then the exit status
"""

import os
import re
import signal
import subprocess
import threading
import time


class PacelinedProcess:
    """One pacelined child process in its own session (kill() ends the group)."""

    def __init__(self, binary, args, ready_timeout=60.0):
        self.proc = subprocess.Popen(
            [binary] + list(args), stdin=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)
        self._lines = []
        self._cond = threading.Condition()
        self._closed = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self.wait_for_stderr("pacelined: ready", ready_timeout):
            self.kill()
            raise RuntimeError(f"pacelined did not become ready:\n"
                               f"{self.stderr_text()}")
        match = re.search(r"^pacelined: listening on (\S+)$",
                          self.stderr_text(), re.M)
        if match is None:
            self.kill()
            raise RuntimeError(f"no listening line:\n{self.stderr_text()}")
        self.address = match.group(1)

    def port(self, pattern):
        """The int group 1 of the stderr line "pacelined: " + pattern."""
        match = re.search(r"^pacelined: " + pattern + r"$",
                          self.stderr_text(), re.M)
        if match is None:
            self.kill()
            raise RuntimeError(f"no line {pattern!r}:\n{self.stderr_text()}")
        return int(match.group(1))

    def _read(self):
        for raw in self.proc.stderr:
            with self._cond:
                self._lines.append(raw.decode("utf-8", "replace"))
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def stderr_text(self):
        with self._cond:
            return "".join(self._lines)

    def wait_for_stderr(self, text, timeout):
        """True once stderr contains `text`; False after `timeout` or EOF."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while text not in "".join(self._lines):
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def sigterm(self):
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout=30.0):
        """The exit status once the daemon has exited."""
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def terminate(self, timeout=30.0):
        """SIGTERM, then the exit status once it has drained and exited."""
        self.sigterm()
        return self.wait(timeout)

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self._reader.join(5)
        self.proc.stderr.close()
