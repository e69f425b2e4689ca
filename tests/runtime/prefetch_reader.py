"""A program for the prefetched-read tests, run under libharmonia: it carries out the steps given
as a JSON list in argv[1] and prints one JSON object with what each step returned.

Steps: {"open": PATH, "as": NAME, "mode": "r"|"rw"}, {"read": NAME, "n": N},
{"pread": NAME, "n": N, "at": OFFSET}, {"readv": NAME, "sizes": [N, ...]},
{"preadv": NAME, "sizes": [N, ...], "at": OFFSET}, {"tell": NAME}, {"close": NAME},
{"dup": NAME, "as": NAME}, {"fork_pread": NAME, "n": N, "at": OFFSET} (in a forked child),
{"background_open": PATH, "after": SECONDS} (in a thread: its open and close take
marks["background"] seconds), {"touch": PATH}, {"sleep": SECONDS}, {"mark": LABEL}. Bytes come back as hex."""

import json
import os
import sys
import threading
import time


def main() -> None:
    steps = json.loads(sys.argv[1])
    fds: dict[str, int] = {}
    out: list[object] = []
    marks: dict[str, float] = {}
    threads: list[threading.Thread] = []

    def open_and_close(path: str, after: float) -> None:
        time.sleep(after)
        begin = time.monotonic()
        os.close(os.open(path, os.O_RDONLY))
        marks["background"] = time.monotonic() - begin

    for step in steps:
        if "open" in step:
            flags = os.O_RDWR if step.get("mode") == "rw" else os.O_RDONLY
            fds[step["as"]] = os.open(step["open"], flags)
            out.append(None)
        elif "read" in step:
            out.append(os.read(fds[step["read"]], step["n"]).hex())
        elif "pread" in step:
            out.append(os.pread(fds[step["pread"]], step["n"], step["at"]).hex())
        elif "readv" in step:
            buffers = [bytearray(n) for n in step["sizes"]]
            got = os.readv(fds[step["readv"]], buffers)
            out.append(b"".join(buffers)[:got].hex())
        elif "preadv" in step:
            buffers = [bytearray(n) for n in step["sizes"]]
            got = os.preadv(fds[step["preadv"]], buffers, step["at"])
            out.append(b"".join(buffers)[:got].hex())
        elif "tell" in step:
            out.append(os.lseek(fds[step["tell"]], 0, os.SEEK_CUR))
        elif "close" in step:
            os.close(fds.pop(step["close"]))
            out.append(None)
        elif "dup" in step:
            fds[step["as"]] = os.dup(fds[step["dup"]])
            out.append(None)
        elif "fork_pread" in step:
            reading, writing = os.pipe()
            child = os.fork()
            if child == 0:
                os.write(
                    writing, os.pread(fds[step["fork_pread"]], step["n"], step["at"])
                )
                os._exit(0)
            os.close(writing)
            os.waitpid(child, 0)
            out.append(os.read(reading, step["n"]).hex())
            os.close(reading)
        elif "background_open" in step:
            threads.append(
                threading.Thread(
                    target=open_and_close, args=(step["background_open"], step["after"])
                )
            )
            threads[-1].start()
            out.append(None)
        elif "touch" in step:
            # A new modification time: the file's identity changes, not its bytes.
            later = time.time_ns() + 5_000_000_000
            os.utime(step["touch"], ns=(later, later))
            out.append(None)
        elif "sleep" in step:
            time.sleep(step["sleep"])
            out.append(None)
        elif "mark" in step:
            marks[step["mark"]] = time.time()
            out.append(None)
    for thread in threads:
        thread.join()
    print(json.dumps({"results": out, "marks": marks}))


if __name__ == "__main__":
    main()
