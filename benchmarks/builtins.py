"""The built-ins of issue 28 item 3: what a terminal costs ``exec_command``, and what
fitting an image costs ``view_image``, each against a bare floor in the same run.

- **exec_command**: ``echo ok`` with ``login: false``, on pipes and with ``tty: true``
  (unconfined, under the subreaper supervisor), against the floor of a bare
  ``trio.run_process(["/bin/sh", "-c", "echo ok"])``, and a bare terminal (``os.openpty``
  and the same process on its slave, read to EIO). Interleaved, ``--runs`` each.
- **view_image**: a 4000x3000 PNG (fitted to 2048 px and 2,500 patches: 1600x1200) and a
  640x480 one (within the limits, passed byte for byte after a full decode), against
  the floor of reading the file and base64-encoding it.

    python -m benchmarks.builtins [--runs 40]
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from ._common import ms, record_summary, table


async def _bare_process() -> None:
    await trio.run_process(["/bin/sh", "-c", "echo ok"], capture_stdout=True)


async def _bare_terminal() -> None:
    master, slave = os.openpty()
    try:
        process = await trio.lowlevel.open_process(
            ["/bin/sh", "-c", "echo ok"], stdin=slave, stdout=slave, stderr=slave, start_new_session=True
        )
        os.close(slave)
        slave = -1
        stream = trio.lowlevel.FdStream(master)
        master = -1
        async with stream:
            try:
                while await stream.receive_some(4096):
                    pass
            except trio.BrokenResourceError:  # EIO: every slave is closed
                pass
        await process.wait()
    finally:
        for fd in (master, slave):
            if fd >= 0:
                os.close(fd)


async def _timed(step: Callable[[], Awaitable[object]], into: list[float]) -> None:
    start = time.perf_counter()
    await step()
    into.append(time.perf_counter() - start)


async def _exec_rows(runs: int) -> list[list[str]]:
    from trio_agent._tools.exec_command import ShellSessions

    samples: dict[str, list[float]] = {"pipes": [], "tty": [], "bare process": [], "bare terminal": []}
    with tempfile.TemporaryDirectory() as workspace:
        async with trio.open_nursery() as nursery:
            shell = ShellSessions(nursery, Path(workspace))
            try:
                await shell.exec_command({"cmd": "true", "login": False})  # the helper starts once
                for _ in range(runs):
                    await _timed(lambda: shell.exec_command({"cmd": "echo ok", "login": False}), samples["pipes"])
                    await _timed(lambda: shell.exec_command({"cmd": "echo ok", "login": False, "tty": True}),
                                 samples["tty"])
                    await _timed(_bare_process, samples["bare process"])
                    await _timed(_bare_terminal, samples["bare terminal"])
            finally:
                await shell.aclose()
    floor = statistics.median(samples["bare process"])
    return [[name, ms(statistics.median(values)), f"{statistics.median(values) / floor:.2f}"]
            for name, values in samples.items()]


def _png(size: tuple[int, int]) -> bytes:
    from PIL import Image

    image = Image.new("RGB", size, (240, 240, 240))
    image.paste((220, 30, 10), (0, 0, size[0] // 2, size[1] // 2))
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


async def _image_rows(runs: int) -> list[list[str]]:
    from trio_agent._tools._view_image import view_image

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder)
        for name, size in (("4000x3000 PNG (fitted)", (4000, 3000)), ("640x480 PNG (as is)", (640, 480))):
            path = workspace / f"{size[0]}.png"
            path.write_bytes(_png(size))
            ours: list[float] = []
            floor: list[float] = []

            async def viewed(path: Path = path) -> None:
                await view_image(workspace, {"path": path.name})

            async def bare(path: Path = path) -> None:
                base64.b64encode(await trio.Path(path).read_bytes())

            for _ in range(runs):
                await _timed(viewed, ours)
                await _timed(bare, floor)
            rows.append([name, ms(statistics.median(ours)), ms(statistics.median(floor)),
                         f"{statistics.median(ours) / statistics.median(floor):.1f}"])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    subprocess.run(["true"], check=True)  # page in the spawn path before timing
    exec_rows = trio.run(_exec_rows, args.runs)
    print(table(f"exec_command, echo ok (p50 ms of {args.runs}; ratio to the bare process)",
                ["", "p50 ms", "ratio"], exec_rows))
    print()
    image_rows = trio.run(_image_rows, args.runs)
    print(table(f"view_image (p50 ms of {args.runs})", ["", "view_image", "read+base64", "ratio"], image_rows))
    record_summary([[f"exec_command {row[0]}", row[1], "bare process", f"x{row[2]}", "-"] for row in exec_rows
                    if not row[0].startswith("bare")]
                   + [[f"view_image {row[0]}", row[1], row[2], f"x{row[3]}", "-"] for row in image_rows])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
