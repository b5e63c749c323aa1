"""The library's commands: ``analyze``, ``experiments``, ``plot``, ``export``.

``build_parser(*commands)`` takes more commands from a caller: the ``fdcontrol`` console
script is the service's entry point (server/main.py), which adds ``serve``; the library
itself never imports the service. ``python -m fdcontrol.cli`` runs the library commands alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable

import numpy as np

from fdcontrol.extras import MissingExtra, require
from fdcontrol.mappings import analyze, make_mapping, mapping_names, mapping_params, settings_kwargs
from fdcontrol.model.robot import ModelError, RobotModel

ANALYZE_JSON = """--json prints one object:
  {"robot": str, "q": [N floats], "type": "joint" | "cartesian", "manipulability_J": float,
   "mappings": {<mapping name>: {"params": {...}, "singular_values": [...], "sigma_min": float,
                                 "sigma_max": float, "condition": float | null, "singular": bool,
                                 "manipulability": float}},
   "why_singular": str | null}   (J's rank and the tip direction lost, when J is singular at q)
Joint values starting with a minus: --q=-1.2,0.3,... or --q -1.2 0.3 ... (or --q -1.2,0.3,...)."""

_NUMBER_LIST = re.compile(r"^-[\d.][\d.eE+\-]*([,\s][\d.eE+\-]*)*$")


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in re.split(r"[,\s]+", text.strip()) if x != ""]
    except ValueError as exc:
        raise ModelError(f"cannot parse {text!r} as comma-separated numbers") from exc


def _attach_negative_values(argv: list[str]) -> list[str]:
    """``--q -1.2,0.3`` → ``--q=-1.2,0.3``: argparse would read the negative list as an option."""
    out: list[str] = []
    for tok in argv:
        if out and out[-1] == "--q" and _NUMBER_LIST.match(tok) and "," in tok:
            out[-1] = f"--q={tok}"
        else:
            out.append(tok)
    return out


def singularity_note(J: np.ndarray, rel: float = 1e-9) -> str | None:
    """Why every mapping looks singular at this q, in words: J's rank and the tip direction it cannot
    move in (the left singular vector of the smallest singular value); None when J has full rank."""
    U, sv, _ = np.linalg.svd(J)
    rank = int(np.sum(sv > rel * sv[0])) if sv.size and sv[0] > 0 else 0
    if rank == min(J.shape):
        return None
    u = U[:, -1]
    k = int(np.argmax(np.abs(u)))
    axis = ("x", "y", "z")[k % 3]
    what = f"{'linear' if k < 3 else 'angular'} {axis}"
    return (f"J is singular here (rank {rank} of {min(J.shape)}): the tip cannot move along {what} "
            f"(direction [v; ω] = {np.array2string(u, precision=2, suppress_small=True)}); a stretched arm "
            "or two aligned joint axes does this — every joint at zero often lines the links up. "
            "Analyze a bent pose instead.")


def cmd_analyze(args: argparse.Namespace) -> int:
    robot = RobotModel.resolve(args.robot, args.base, args.tip)
    q = robot.check_q(_floats(" ".join(args.q)))
    names = mapping_names() if args.mapping == "all" else (args.mapping,)
    out: dict[str, dict[str, object]] = {}
    for name in names:
        m = make_mapping(name, robot, **settings_kwargs(name, vars(args)))
        matrix = m.joint_space(q) if args.type == "joint" else m.cartesian(q)
        out[name] = {"params": m.params(), **analyze(matrix).as_dict()}
    note = singularity_note(robot.jacobian(q))
    if args.json:
        print(json.dumps({"robot": robot.name, "q": q.tolist(), "type": args.type,
                          "manipulability_J": robot.manipulability(q), "mappings": out, "why_singular": note}))
        return 0
    print(f"{robot.name}  q = {np.array2string(q, precision=4)}  type = {args.type}  "
          f"w(J) = {robot.manipulability(q):.4g}")
    print(f"{'mapping':8} {'sigma_min':>11} {'sigma_max':>11} {'kappa':>11}  singular values")
    for name, r in out.items():
        kappa = "inf" if r["condition"] is None else f"{r['condition']:.4g}"
        sv = " ".join(f"{s:.3g}" for s in r["singular_values"])  # type: ignore[union-attr]
        print(f"{name:8} {r['sigma_min']:11.4g} {r['sigma_max']:11.4g} {kappa:>11}  {sv}")
    if note:
        print(note)
    return 0


def cmd_experiments(args: argparse.Namespace) -> int:
    require("experiments", "the experiments")
    from fdcontrol.experiments import EXPERIMENTS, run

    if args.recording:  # the singular-value study along a recorded trajectory
        from fdcontrol.experiments.recorded import run_recording

        try:
            run_recording(args.recording, args.out, args.samples, args.quick, progress=not args.no_progress)
        except (OSError, ValueError) as exc:
            raise ModelError(str(exc)) from exc
        return 0
    names = args.names or ["all"]
    for n in names:
        if n != "all" and n not in EXPERIMENTS:
            raise ModelError(f"unknown experiment {n!r}; expected all or one of {', '.join(EXPERIMENTS)}")
    if args.samples is not None and args.samples < 2:
        raise ModelError("--samples must be >= 2")
    run(names, RobotModel.resolve(args.robot), args.out, args.seed, args.quick, args.samples,
        progress=not args.no_progress)
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    require("experiments", "plotting")
    from fdcontrol.plot import plot_file

    try:
        paths = plot_file(args.file, args.out)
    except (OSError, ValueError) as exc:
        print(f"fdcontrol plot: error: {exc}", file=sys.stderr)
        return 2
    for p in paths:
        print(p)
    return 0


def _terminal_keys():  # pragma: no cover - a terminal is needed
    """A poll() of the characters typed (cbreak mode on a terminal; a pipe is read as it comes)."""
    import select

    fd = sys.stdin.fileno()

    def poll() -> list[str]:
        out: list[str] = []
        while select.select([fd], [], [], 0)[0]:
            b = os.read(fd, 64)
            if not b:
                break
            out += list(b.decode(errors="ignore"))
        return out

    return poll


def cmd_teleop(args: argparse.Namespace) -> int:
    require("server", "teleoperation (the service's client)")
    try:
        return _teleop(args)
    except (ValueError, RuntimeError, OSError) as exc:  # a bad setting, no mouse, a refused stream
        print(f"fdcontrol teleop: error: {exc}", file=sys.stderr)
        return 2


def _teleop(args: argparse.Namespace) -> int:
    from fdcontrol.client import Client
    from fdcontrol.teleop import Keyboard, Mapping, SpaceMouse, run

    mapping = Mapping(args.kind, args.deadband, args.linear, args.angular, args.force, args.torque, args.frame)
    duration = args.duration if args.duration is not None else float("inf")
    with Client(args.url, token=args.token or os.environ.get("FDCONTROL_TOKEN")) as client:
        if args.device == "spacemouse":
            mouse = SpaceMouse.open(args.name)
            print(f"fdcontrol teleop: {args.kind} from the 3-D mouse; button {args.hold_button} holds/releases; "
                  "Ctrl-C ends", file=sys.stderr)
            try:
                out = run(client, mouse, mapping, args.rate, duration, args.hold_button)
            except KeyboardInterrupt:
                out = {}
            finally:
                mouse.close()
        else:
            print("fdcontrol teleop: w/s x, a/d y, q/e z, i/k j/l u/o rotate about x/y/z; space stops, h holds/"
                  "releases; Ctrl-C ends", file=sys.stderr)
            keys = Keyboard()
            restore = None
            if sys.stdin.isatty():  # pragma: no cover - a terminal is needed
                import termios
                import tty

                fd = sys.stdin.fileno()
                saved = termios.tcgetattr(fd)
                tty.setcbreak(fd)

                def restore() -> None:
                    termios.tcsetattr(fd, termios.TCSADRAIN, saved)
            try:
                out = run(client, keys, mapping, args.rate, duration, 0, poll=_terminal_keys())
            except KeyboardInterrupt:
                out = {}
            finally:
                if restore is not None:
                    restore()
    if out:
        print(json.dumps(out))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if args.paths[0] == "lerobot":
        return _export_lerobot(args)
    from fdcontrol.export import ExportError, export

    if len(args.paths) != 1:
        print("fdcontrol export: error: one recording (FILE.mcap), or: lerobot FILE.mcap OUT/", file=sys.stderr)
        return 2
    try:
        out = export(args.paths[0], args.to, args.out)
    except (OSError, ValueError, ExportError) as exc:
        print(f"fdcontrol export: error: {exc}", file=sys.stderr)
        return 2
    print(out)
    return 0


def _export_lerobot(args: argparse.Namespace) -> int:
    if len(args.paths) != 3:
        print("fdcontrol export lerobot: error: give the recording and a new directory: "
              "fdcontrol export lerobot FILE.mcap OUT/ --fps N", file=sys.stderr)
        return 2
    from fdcontrol.export_lerobot import export_lerobot

    try:
        out = export_lerobot(args.paths[1], args.paths[2], args.fps, args.per, args.task, args.action, args.repo_id)
    except (OSError, ValueError) as exc:
        print(f"fdcontrol export lerobot: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


#: adds one sub-command (its parser's ``func`` default runs it and returns the exit code)
Command = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def build_parser(*commands: Command) -> argparse.ArgumentParser:
    """analyze, experiments, then `commands` (the service's ``serve``), then plot.

    Every choice is read from a registry, so it includes the installed plugins' parts.
    """
    p = argparse.ArgumentParser(prog="fdcontrol", description="Cartesian admittance control with virtual "
                                "forward dynamics: analyze | experiments | serve | plot | export.")
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("analyze", help="singular values of the mappings at one configuration",
                       epilog=ANALYZE_JSON, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--robot", default="ur10", help="ur10 | panda | planar2 | path/to.urdf")
    a.add_argument("--base", default=None, help="base frame (required for a URDF path)")
    a.add_argument("--tip", default=None, help="tip frame (required for a URDF path)")
    a.add_argument("--q", required=True, nargs="+", metavar="Q",
                   help="joint positions (rad), comma or space separated; see below for negative values")
    a.add_argument("--mapping", default="all", choices=(*mapping_names(), "all"))
    seen: set[str] = set()
    for prm in (x for n in mapping_names() for x in mapping_params(n)):  # each mapping's declared parameters
        if prm.name not in seen:
            seen.add(prm.name)
            a.add_argument(f"--{prm.name.replace('_', '-')}", dest=prm.name, default=prm.default,
                           type=float if prm.kind == "float" else str, choices=prm.options() or None,
                           help=f"{prm.description}{f' ({prm.unit})' if prm.unit else ''} [{prm.owner}]")
    a.add_argument("--type", default="joint", choices=("joint", "cartesian"))
    a.add_argument("--json", action="store_true", help="print one JSON object (shape below)")
    a.set_defaults(func=cmd_analyze)
    e = sub.add_parser("experiments", help="reproduce the seed paper's experiments (PNG, JSON, markdown)")
    e.add_argument("names", nargs="*", help="all | decoupling | conditioning | singular-path | "
                   "singular-sweep | timing | numerics | limits | integrators | sdls-rate")
    e.add_argument("--robot", default="ur10")
    e.add_argument("--samples", type=int, default=None, help="override every sample count")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--out", default="out/experiments")
    e.add_argument("--quick", action="store_true", help="reduced sample counts (< 1 min)")
    e.add_argument("--no-progress", action="store_true")
    e.add_argument("--recording", default=None, metavar="FILE.mcap",
                   help="instead: σmin/σmax of every mapping along the joint path of a recording")
    e.set_defaults(func=cmd_experiments)
    for add in commands:
        add(sub)
    pl = sub.add_parser("plot", help="standard figures (PNG) of an MCAP recording")
    pl.add_argument("file", help="a recording (.mcap) from POST /recording/start or serve --record")
    pl.add_argument("--out", default=None, help="output directory (default: next to the file, FILE stem)")
    pl.set_defaults(func=cmd_plot)
    t = sub.add_parser("teleop", help="stream a tip twist or wrench from a 3-D mouse or the keyboard to the service")
    t.add_argument("device", choices=("spacemouse", "keyboard"))
    t.add_argument("--url", default="http://127.0.0.1:8000", help="the service")
    t.add_argument("--token", default=None, help="API token (or FDCONTROL_TOKEN)")
    t.add_argument("--kind", default="twist", choices=("twist", "wrench"), help="what the axes command")
    t.add_argument("--deadband", type=float, default=0.1, help="fraction of full deflection read as zero")
    t.add_argument("--linear", type=float, default=0.1, help="m/s at full deflection (twist)")
    t.add_argument("--angular", type=float, default=0.5, help="rad/s at full deflection (twist)")
    t.add_argument("--force", type=float, default=20.0, help="N at full deflection (wrench)")
    t.add_argument("--torque", type=float, default=2.0, help="N·m at full deflection (wrench)")
    t.add_argument("--frame", default="base", choices=("base", "tool"))
    t.add_argument("--rate", type=float, default=100.0, help="commands per second (Hz)")
    t.add_argument("--duration", type=float, default=None, help="s (default: until Ctrl-C)")
    t.add_argument("--hold-button", type=int, default=0, help="the mouse button that holds/releases (index)")
    t.add_argument("--name", default=None, help="which 3-D mouse (pyspacemouse's device name; default: the first)")
    t.set_defaults(func=cmd_teleop)
    ex = sub.add_parser("export", help="episodes of an MCAP recording as aligned arrays (npz or parquet) or as "
                        "a LeRobot dataset (export lerobot FILE.mcap OUT/ --fps N)")
    ex.add_argument("paths", nargs="+", metavar="FILE",
                    help="a recording (.mcap) holding episodes (POST /episode/start); or: lerobot FILE.mcap OUT/")
    ex.add_argument("--to", default="npz", choices=("npz", "parquet"))
    ex.add_argument("--out", default=None, help="output file (default: next to the recording)")
    ex.add_argument("--fps", type=float, default=30.0, help="lerobot: frames per second (sample-and-hold)")
    ex.add_argument("--per", default="episode", choices=("episode", "recording"),
                    help="lerobot: one dataset episode per recorded episode, or the whole recording as one")
    ex.add_argument("--task", default=None, help="lerobot: the task of every episode (default: each one's own)")
    ex.add_argument("--action", default="delta_pose", choices=("delta_pose", "pose", "twist", "joint_delta"),
                    help="lerobot: the action kind (the step from one frame to the next)")
    ex.add_argument("--repo-id", dest="repo_id", default=None, help="lerobot: the dataset's repo id "
                    "(default local/FILE)")
    ex.set_defaults(func=cmd_export)
    return p


def main(argv: list[str] | None = None, parser: argparse.ArgumentParser | None = None) -> int:
    """Run one command; `parser` defaults to the library's (without ``serve``)."""
    parser = parser or build_parser()
    args = parser.parse_args(_attach_negative_values(sys.argv[1:] if argv is None else list(argv)))
    try:
        return int(args.func(args))
    except (ModelError, MissingExtra) as exc:
        print(f"fdcontrol: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `fdcontrol analyze … --json | head`: the reader left, no traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python flushes stdout at exit: into /dev/null now
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
