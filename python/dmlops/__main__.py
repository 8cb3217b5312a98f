"""``python -m dmlops``: pad DirectML's 1x1x4x4 example in all five modes, upsample DirectML's
2x2 DxDispatch example, and check the results.

``python -m dmlops run model.json [--out DIR] [--input_path DIR]``: run a DirectML DxDispatch
model file (see :mod:`dmlops.dxdispatch`), printing what its ``print`` commands ask for;
``writeFile`` targets go to DIR (``--output_path`` is DxDispatch's name for ``--out``),
``sourcePath`` files are looked for in ``--input_path`` (default: the model's directory). A bad
file prints one ``error: FILE: json.path: message`` line and exits with status 1.

The expected tensors for constant, edge, reflection and symmetric are DirectML's own worked
examples (DML_PADDING1_OPERATOR_DESC); wrap follows dmlops' rule (i mod n); the upsampled
table is the one DirectML's DxDispatch upsample sample prints.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Optional, Sequence

import numpy as np

import dmlops
from dmlops import dxdispatch

ROW_A, ROW_B = [1, 2, 3, 4], [5, 6, 7, 8]
INPUT = np.array([[[ROW_A, ROW_B, ROW_A, ROW_B]]], dtype=np.float32)
START, END = (0, 0, 1, 2), (0, 0, 3, 4)

_c9 = [9] * 10
_ca, _cb = [9, 9, 1, 2, 3, 4, 9, 9, 9, 9], [9, 9, 5, 6, 7, 8, 9, 9, 9, 9]
_ea, _eb = [1, 1, 1, 2, 3, 4, 4, 4, 4, 4], [5, 5, 5, 6, 7, 8, 8, 8, 8, 8]
_ra, _rb = [3, 2, 1, 2, 3, 4, 3, 2, 1, 2], [7, 6, 5, 6, 7, 8, 7, 6, 5, 6]
_sa, _sb = [2, 1, 1, 2, 3, 4, 4, 3, 2, 1], [6, 5, 5, 6, 7, 8, 8, 7, 6, 5]
_wa, _wb = [3, 4, 1, 2, 3, 4, 1, 2, 3, 4], [7, 8, 5, 6, 7, 8, 5, 6, 7, 8]

EXPECTED = {
    "constant": [_c9, _ca, _cb, _ca, _cb, _c9, _c9, _c9],
    "edge": [_ea, _ea, _eb, _ea, _eb, _eb, _eb, _eb],
    "reflection": [_rb, _ra, _rb, _ra, _rb, _ra, _rb, _ra],
    "symmetric": [_sa, _sa, _sb, _sa, _sb, _sb, _sa, _sb],
    "wrap": [_wb, _wa, _wb, _wa, _wb, _wa, _wb, _wa],
}


UPSAMPLE_INPUT = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
UPSAMPLE_EXPECTED = np.array([[[[1, 1.25, 1.75, 2], [1.5, 1.75, 2.25, 2.5],
                                [2.5, 2.75, 3.25, 3.5], [3, 3.25, 3.75, 4]]]], dtype=np.float32)


def demo() -> int:
    print(f"dmlops {dmlops.__version__} - {dmlops.get_num_threads()} thread(s)")
    print(f"input {INPUT.shape}, start_padding {START}, end_padding {END}:")
    print(INPUT[0, 0].astype(int))
    failures = 0
    for mode, rows in EXPECTED.items():
        y = dmlops.pad(INPUT, START, END, mode=mode, value=9)
        expected = np.array([[rows]], dtype=np.float32)
        ok = y.shape == expected.shape and np.array_equal(y, expected)
        failures += not ok
        print(f"\n{mode}: output {y.shape} {'matches' if ok else 'DOES NOT MATCH'} the expected tensor")
        print(y[0, 0].astype(int))
    desc = dmlops.Padding1Desc(dmlops.TensorDesc("float32", INPUT.shape), padding_mode="symmetric",
                               start_padding=START, end_padding=END)
    round_trip = dmlops.Padding1Desc.from_dict(desc.to_dict()) == desc
    failures += not round_trip
    print(f"\nPadding1Desc -> to_dict -> from_dict round trip: {'ok' if round_trip else 'FAILED'}")
    print(desc.to_dict())
    y = dmlops.upsample_2d(UPSAMPLE_INPUT, (2, 2), "linear")
    ok = np.array_equal(y, UPSAMPLE_EXPECTED)
    failures += not ok
    print(f"\nupsample_2d linear x2 of [[1, 2], [3, 4]]: {'matches' if ok else 'DOES NOT MATCH'} DxDispatch's table")
    print(y[0, 0])
    print("\nall checks passed" if failures == 0 else f"\n{failures} check(s) FAILED")
    return 1 if failures else 0


def _one_line(text: str) -> str:
    """``text`` with its control characters (a newline in a resource name) and undecodable
    bytes escaped, so that one message is one line."""
    return "".join(c if c.isprintable() or c == " " else ascii(c)[1:-1] for c in text)


def run_model(path: str, out_dir: Optional[str], input_dir: Optional[str] = None) -> int:
    """Run a model file: its warnings, then what it prints; any problem with the file is one
    ``error: FILE: json.path: message`` line on stderr and exit status 1."""
    if hasattr(sys.stdout, "reconfigure"):  # INT8/UINT8 print as raw bytes, as DxDispatch's do
        sys.stdout.reconfigure(errors="surrogateescape")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", dxdispatch.ModelWarning)
            model = dxdispatch.load(path, input_dir)
        for warning in caught:
            print(_one_line(f"warning: {path}: {warning.message}"), file=sys.stderr)
        model.run(out_dir, log=print)
    except dxdispatch.ModelError as e:
        print(_one_line(f"error: {e.source}: {e}" if e.source else f"error: {e}"), file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dmlops",
                                     description="Without a command: run the self-checking demo.")
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="run a DirectML DxDispatch model file (.json)")
    run.add_argument("model", help="the model file")
    run.add_argument("--out", "--output_path", dest="out", metavar="DIR",
                     help="directory for writeFile targets (skipped without it); --output_path as in DxDispatch")
    run.add_argument("--input_path", metavar="DIR",
                     help="directory where sourcePath files are looked for first (default: the model's)")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_model(args.model, args.out, args.input_path)
    return demo()


if __name__ == "__main__":
    sys.exit(main())
