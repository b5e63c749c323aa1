"""Build the fdcontrol image and check it as deployed: ``make image`` and ``make image-test``.

    python3 scripts/container.py image [--tag T] [--base B] [--extras E]
    python3 scripts/container.py test  [--tag T]

Standard library only (runs before any virtual environment exists). The engine is docker where
a daemon answers, else podman (``CONTAINER_ENGINE=podman`` forces one).

``image``: the base image (build argument ``BASE``) is pulled; where no registry is reachable
and the default is asked for, Debian bookworm (python3 3.11) is made locally with debootstrap
and imported as ``localhost/fdcontrol-base:bookworm``. pip inside the build uses this machine's
pip configuration and certificate bundle, passed as build secrets; local wheel directories and
``file://`` indexes named there are bind-mounted read-only into the build (podman). Nothing of
them is copied into the image or the repository.

``test``: the checks a deployment relies on, each able to fail (see ``main_container`` and
below); prints one line per check and exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import io
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TAG = "localhost/fdcontrol:latest"
DEFAULT_BASE = "docker.io/library/python:3.11-slim"
LOCAL_BASE = "localhost/fdcontrol-base:bookworm"
DEFAULT_EXTRAS = "server,mujoco,ros2,fast"
#: podman on a cgroup v1 host: runc (crun refuses hybrid layouts), cgroupfs, no rlimits
PODMAN_CGROUPV1_CONF = ROOT / "scripts" / "podman-cgroupv1.conf"
#: what the final image must not hold: compilers, pip, test tools
FORBIDDEN = ("gcc", "cc", "c++", "g++", "clang", "make", "pip", "pip3", "pytest", "ruff")
#: documented: the service exits within the engines' default stop grace (docker/podman stop -t 10)
STOP_GRACE_S = 10.0
#: the test containers' watchdog (command_timeout, and the ROS 2 joint_states timeout): headroom for a loaded,
#: shared test machine, where a 0.1 s pause of a peer or of the loop's heartbeat thread happens; it holds the
#: arm as it should, but these checks are about the container, not this machine's latency (deployments keep 0.1 s)
TEST_TIMEOUT_S = "0.5"
#: the realtime cgroup made for the test on cgroup v1 hosts with RT group scheduling
RT_CGROUP = "fdcontrol-rt"
#: (µs of each 1 s period, per CPU): the loop thread at 500 Hz with the simulated arm needs a good
#: share of a core; a too small budget throttles it for the rest of the period and /health reports it stuck
RT_PARENT_US, RT_CONTAINER_US = 900_000, 800_000


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- engine


class Engine:
    def __init__(self) -> None:
        forced = os.environ.get("CONTAINER_ENGINE")
        if forced:
            self.name = forced
        elif shutil.which("docker") and _ok(["docker", "info"]):
            self.name = "docker"
        elif shutil.which("podman"):
            self.name = "podman"
        else:
            raise SystemExit("no container engine: install docker (with a running daemon) or podman")
        self.env = dict(os.environ)
        if self.name == "podman" and not Path("/sys/fs/cgroup/cgroup.controllers").exists() \
                and "CONTAINERS_CONF" not in self.env:
            self.env["CONTAINERS_CONF"] = str(PODMAN_CGROUPV1_CONF)  # cgroup v1: runc + cgroupfs

    def run(self, *args: str, check: bool = True, timeout: float | None = 120, capture: bool = True,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([self.name, *args], env=self.env, text=True, timeout=timeout, input=input,
                           capture_output=capture, stdin=None if input is not None else subprocess.DEVNULL)
        if check and p.returncode != 0:
            raise RuntimeError(f"{self.name} {' '.join(args[:3])} … failed ({p.returncode}): "
                               f"{(p.stderr or '').strip()[-2000:]}")
        return p

    def has_image(self, ref: str) -> bool:
        return self.run("image", "inspect", ref, check=False).returncode == 0

    def rm(self, *names: str) -> None:
        for n in names:
            self.run("rm", "-f", "-t", "0", n, check=False) if self.name == "podman" else \
                self.run("rm", "-f", n, check=False)


def _ok(cmd: list[str]) -> bool:
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20, stdin=subprocess.DEVNULL).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# ---------------------------------------------------------------- image


def base_image(engine: Engine, base: str) -> str:
    """`base`, pulled if missing; the default falls back to a local debootstrap of Debian bookworm."""
    if engine.has_image(base):
        return base
    log(f"pulling {base} …")
    p = engine.run("pull", base, check=False, timeout=300)
    if p.returncode == 0:
        return base
    if base != DEFAULT_BASE:
        raise SystemExit(f"base image {base} cannot be pulled: {p.stderr.strip()[-500:]}")
    log(f"{base} cannot be pulled ({p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}); "
        f"using {LOCAL_BASE} made with debootstrap")
    if not engine.has_image(LOCAL_BASE):
        make_local_base(engine)
    return LOCAL_BASE


def make_local_base(engine: Engine) -> None:
    if not shutil.which("debootstrap"):
        raise SystemExit("no base image: install debootstrap (apt-get install debootstrap) or make BASE pullable")
    mirror = os.environ.get("DEBIAN_MIRROR", "http://deb.debian.org/debian")
    with tempfile.TemporaryDirectory(prefix="fdcontrol-base-") as tmp:
        root = Path(tmp) / "root"
        t0 = time.monotonic()
        subprocess.run(["debootstrap", "--variant=minbase", "--include=python3,python3-venv,ca-certificates",
                        "bookworm", str(root), mirror], check=True, stdout=subprocess.DEVNULL,
                       stdin=subprocess.DEVNULL, timeout=1200)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for f in (root / junk).glob("*"):
                if f.is_file():
                    f.unlink()
        imp = pipe_into(["tar", "-C", str(root), "-c", "."],
                        [engine.name, "import", "--change", 'CMD ["/bin/bash"]', "-", LOCAL_BASE], engine.env)
        if imp.returncode != 0:
            raise SystemExit(f"importing the debootstrap base failed: {imp.stderr.strip()}")
        log(f"made {LOCAL_BASE} with debootstrap in {time.monotonic() - t0:.0f} s")


def pipe_into(producer: list[str], consumer: list[str], env: dict[str, str],
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`producer | consumer`; the consumer's result, failed (returncode ≠ 0) when either fails.

    Only the consumer holds the pipe's reading end: when the consumer exits early (an engine that
    cannot run at all), the producer gets SIGPIPE and ends instead of blocking on a full pipe."""
    prod = subprocess.Popen(producer, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert prod.stdout is not None
        cons = subprocess.Popen(consumer, stdin=prod.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env, text=True)
        prod.stdout.close()  # our copy of the reading end: the consumer's is the only one left
        out, err = cons.communicate(timeout=timeout)
        prod_rc = prod.wait(timeout=60)
    finally:
        for p in (prod, locals().get("cons")):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    rc = cons.returncode
    if rc == 0 and prod_rc != 0:
        rc, err = prod_rc, f"{err}\n{producer[0]} exited with {prod_rc}"
    return subprocess.CompletedProcess(consumer, rc, out, err)


def engine_problem(engine: Engine) -> str | None:
    """Why the engine cannot run containers at all (podman without its OCI runtime, a docker client
    without a daemon), in its own words; None when it can. Checked before any slow step."""
    p = engine.run("info", check=False, timeout=60)
    if p.returncode == 0:
        return None
    lines = (p.stderr or p.stdout or "").strip().splitlines()
    return f"{engine.name} cannot run containers: {lines[-1] if lines else f'{engine.name} info failed'}"


def pip_config() -> tuple[str, list[str], str | None]:
    """This machine's pip configuration merged into one file's text (``pip config list``: files and
    PIP_* variables), the local directories it names, and its certificate bundle."""
    out = ""
    for py in (sys.executable, "python3"):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            p = subprocess.run([py, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
            if p.returncode == 0:
                out = p.stdout
                break
    rank = {"global": 0, "install": 1, ":env:": 2}  # pip's precedence: PIP_* over [install] over [global]
    found: list[tuple[int, str, str]] = []
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if sep and name and section in rank:
            found.append((rank[section], name, value.strip().strip("'\"")))
    values = {name: value for _, name, value in sorted(found, key=lambda f: f[0])}
    cert = values.pop("cert", None)
    for drop in ("cache-dir", "log", "target", "prefix", "user", "root", "src"):
        values.pop(drop, None)
    dirs: list[str] = []
    for name in ("constraint", "requirement"):  # files pip reads for every install: their folders go in too
        for item in values.get(name, "").split():
            top = Path(item).parent
            if Path(item).is_file() and str(top) not in dirs:
                dirs.append(str(top))
    for name in ("find-links", "extra-index-url", "index-url"):
        for item in values.get(name, "").split():
            path = item.removeprefix("file://") if item.startswith("file://") or item.startswith("/") else None
            if path and Path(path).exists():
                top = Path(path)
                while top.parent != Path("/") and top.name in ("simple", "files"):
                    top = top.parent
                if str(top) not in dirs:
                    dirs.append(str(top))
    cfg = configparser.ConfigParser(interpolation=None)
    cfg["global"] = values
    buf = io.StringIO()
    cfg.write(buf)
    text = buf.getvalue()
    cert = cert or os.environ.get("SSL_CERT_FILE")
    if not cert or not Path(cert).is_file():
        cert = "/etc/ssl/certs/ca-certificates.crt" if Path("/etc/ssl/certs/ca-certificates.crt").is_file() else None
    return text, dirs, cert


def build(args: argparse.Namespace) -> int:
    engine = Engine()
    problem = engine_problem(engine)
    if problem:
        raise SystemExit(problem)
    base = base_image(engine, args.base)
    text, dirs, cert = pip_config()
    if engine.name != "podman" and dirs:  # docker build mounts no folders: a file pip must read would be missing
        log(f"docker build cannot mount {', '.join(dirs)}: pip uses the configured remote indexes only")
        text = "\n".join(ln for ln in text.splitlines()
                         if ln.partition("=")[0].strip() not in ("constraint", "requirement", "find-links"))
    with tempfile.TemporaryDirectory(prefix="fdcontrol-build-") as tmp:
        conf, ca = Path(tmp) / "pip.conf", Path(tmp) / "ca.crt"
        conf.write_text(text)
        ca.write_bytes(Path(cert).read_bytes() if cert else b"")
        cmd = ["build", "--network", "host", "--build-arg", f"BASE={base}", "--build-arg", f"EXTRAS={args.extras}",
               "--secret", f"id=pip.conf,src={conf}", "--secret", f"id=ca.crt,src={ca}", "-t", args.tag]
        if engine.name == "podman":
            cmd += ["--format", "docker",  # keeps HEALTHCHECK (the OCI format has none)
                    "--isolation", os.environ.get("BUILD_ISOLATION", "chroot")]
            for d in dirs:
                cmd += ["-v", f"{d}:{d}:ro"]
        replaced = image_id(engine, args.tag)  # removed after the build if nothing else uses it
        log(f"building {args.tag} on {base} with extras [{args.extras}] ({engine.name}) …")
        t0 = time.monotonic()
        p = subprocess.run([engine.name, *cmd, str(ROOT)], env={**engine.env, "DOCKER_BUILDKIT": "1"},
                           stdin=subprocess.DEVNULL)
        took = time.monotonic() - t0
    if p.returncode != 0:
        log(f"image build failed ({p.returncode}) after {took:.0f} s")
        return p.returncode
    size = int(engine.run("image", "inspect", "--format", "{{.Size}}", args.tag).stdout.strip())
    log(f"built {args.tag} in {took:.0f} s; size {size / 1e6:.0f} MB")
    freed = prune_leftovers(engine)
    new = image_id(engine, args.tag)
    if replaced and replaced != new and not image_tags(engine, replaced):  # the image this build untagged
        # never forced: an image a container (the deployed service, say) still uses stays (podman's rmi -f would
        # remove that container with it)
        if engine.run("rmi", replaced, check=False, timeout=300).returncode == 0:
            freed += 1
        else:
            log(f"kept the image this build replaced ({replaced[:19]}): a container still uses it")
    if freed:
        log(f"removed {freed} untagged image(s) (the build stage, the image this build replaced)")
    return 0


LABEL_KEY = "org.fdcontrol.stage"  # the Dockerfile's build stage: org.fdcontrol.stage=build


def image_id(engine: Engine, ref: str) -> str | None:
    p = engine.run("image", "inspect", "--format", "{{.Id}}", ref, check=False)
    if p.returncode != 0:
        return None
    return p.stdout.strip() or None


def image_tags(engine: Engine, ref: str) -> list[str]:
    p = engine.run("image", "inspect", "--format", "{{range .RepoTags}}{{.}} {{end}}", ref, check=False)
    return p.stdout.split() if p.returncode == 0 else []


def leftovers(engine: Engine) -> list[str]:
    """Untagged images of the Dockerfile's build stage (podman keeps one per build, about 1.2 GB each: on a
    machine that builds often they fill the disk)."""
    out = engine.run("images", "-q", "--no-trunc", "--filter", "dangling=true",
                     "--filter", f"label={LABEL_KEY}=build", check=False).stdout
    return sorted(set(out.split()))


def prune_leftovers(engine: Engine) -> int:
    """Remove the build stages' images; never forced (an image in use stays)."""
    ids = leftovers(engine)
    if ids:
        engine.run("rmi", *ids, check=False, timeout=300)
    return len(ids) - len(leftovers(engine))


def clean(args: argparse.Namespace) -> int:
    """Remove the image (the tag) and the build stages' images; the base image stays (it is slow to make).
    Never forced: while a container uses the image it stays, and this says so."""
    engine = Engine()
    if engine.has_image(args.tag):
        engine.run("rmi", args.tag, check=False, timeout=300)
    n = prune_leftovers(engine)
    gone = not engine.has_image(args.tag)
    log(f"{'removed' if gone else 'kept (a container uses it)'} {args.tag}; {n} untagged build image(s) removed")
    return 0 if gone else 1


# ---------------------------------------------------------------- test helpers


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        print(f"{'PASS' if ok else 'FAIL'}  {name}{'  — ' + detail if detail else ''}", flush=True)
        if not ok:
            self.failed.append(name)
        return ok


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(method: str, url: str, token: str | None, body: Any = None, timeout: float = 5) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        data, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"null")
        except ValueError:
            return e.code, raw.decode(errors="replace")
    except (urllib.error.URLError, OSError, ValueError) as e:
        return 0, str(e)


def stream_wrench(url: str, token: str, wrench: list[float], n: int,
                  seen: list[Any] | None = None) -> tuple[int, Any, int, Any]:
    """PUT /control/wrench n times at ~50 Hz with sequence numbers, as a client streams it (the watchdog
    holds the arm when the stream stops); the last response, sequence number and published state
    (every state read on the way is appended to ``seen`` if given)."""
    code, ack, st, seq = 0, None, None, 0
    for seq in range(1, n + 1):
        code, ack = http("PUT", url + "/control/wrench", token, {"wrench": wrench, "frame": "base", "seq": seq})
        if code != 200:
            break
        time.sleep(0.02)
        _, st = http("GET", url + "/state", token)
        if seen is not None:
            seen.append(st)
    return code, ack, seq, st


def wait_for(pred: Callable[[], Any], timeout: float, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


def rt_cgroup() -> list[str]:
    """On cgroup v1 with RT group scheduling a new cgroup has no real-time budget (cpu.rt_runtime_us 0)
    and SCHED_FIFO fails even with CAP_SYS_NICE: give a parent cgroup a budget and the container a share."""
    cpu = Path("/sys/fs/cgroup/cpu")
    if not (cpu / "cpu.rt_runtime_us").exists():
        return []  # cgroup v2, or no RT group scheduling: SYS_NICE is all it takes
    parent = cpu / RT_CGROUP
    parent.mkdir(exist_ok=True)
    if int((parent / "cpu.rt_runtime_us").read_text()) < RT_PARENT_US:
        (parent / "cpu.rt_runtime_us").write_text(str(RT_PARENT_US))
    return ["--cgroup-parent", f"/{RT_CGROUP}", "--cpu-rt-runtime", str(RT_CONTAINER_US)]


def rt_cgroup_remove() -> None:
    """Remove the real-time cgroup and what the engine left in it (podman's conmon cgroup), deepest first."""
    top = Path("/sys/fs/cgroup/cpu") / RT_CGROUP
    if not top.is_dir():
        return
    for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            d.rmdir()
    try:
        top.rmdir()
    except OSError as exc:
        log(f"could not remove {top}: {exc}")


def loop_pid(engine: Engine, name: str) -> int:
    """The loop process inside the container (multiprocessing's spawn child)."""
    code = ("import os, pathlib\n"
            "for p in pathlib.Path('/proc').iterdir():\n"
            "    if p.name.isdigit() and int(p.name) != os.getpid():\n"
            "        try: c = (p / 'cmdline').read_bytes()\n"
            "        except OSError: continue\n"
            "        if b'spawn_main' in c: print(p.name)\n")
    out = engine.run("exec", name, "python", "-c", code).stdout.split()
    if len(out) != 1:
        raise RuntimeError(f"expected one loop process in {name}, found {out}")
    return int(out[0])


def kill_loop(engine: Engine, name: str) -> None:
    """SIGKILL the loop process inside the container (the image has no kill command: Python's)."""
    pid = loop_pid(engine, name)
    engine.run("exec", name, "python", "-c", f"import os, signal; os.kill({pid}, signal.SIGKILL)")


def healthcheck(engine: Engine, name: str) -> str:
    """Run the image's HEALTHCHECK once (podman) or read the engine's last verdict (docker)."""
    if engine.name == "podman":
        p = engine.run("healthcheck", "run", name, check=False, timeout=30)
        return "healthy" if p.returncode == 0 else f"unhealthy ({(p.stdout + p.stderr).strip()})"
    return engine.run("inspect", "--format", "{{.State.Health.Status}}", name).stdout.strip()


def health_status(engine: Engine, name: str) -> str:
    fmt = "{{.State.Health.Status}}" if engine.name == "docker" else "{{.State.Healthcheck.Status}}"
    return engine.run("inspect", "--format", fmt, name, check=False).stdout.strip()


# ---------------------------------------------------------------- test


def test(args: argparse.Namespace) -> int:
    engine = Engine()
    if not engine.has_image(args.tag):
        raise SystemExit(f"no image {args.tag}: run `make image` first")
    c = Checks()
    t0 = time.monotonic()
    run_id = secrets.token_hex(3)
    names = [f"fdcontrol-it-{run_id}-{n}" for n in ("main", "unsupervised", "ros2", "peer", "inuse")]
    engine.rm(*names)
    work = Path(tempfile.mkdtemp(prefix="fdcontrol-image-test-"))
    shm, secrets_dir = work / "shm", work / "secrets"
    shm.mkdir()
    secrets_dir.mkdir()
    try:
        left = leftovers(engine)
        c.check("the build left no untagged images of its own behind", not left, f"{len(left)} left: {left[:3]}")
        image_contents(engine, args.tag, c)
        q_home = main_container(engine, args.tag, names[0], shm, c)
        killed_loop_fails_healthcheck(engine, args.tag, names[1], c)
        ros2_next_to_driver(engine, args.tag, names[2], names[3], q_home, c, secrets_dir)
        clean_keeps_an_image_in_use(engine, args.tag, names[4], c)
    except Exception as exc:  # anything unexpected fails the test, after the clean-up below
        c.check("the image test ran to the end", False, f"{type(exc).__name__}: {exc}")
    finally:
        for n in names:
            if c.failed:
                logs = engine.run("logs", n, check=False, timeout=30)
                if logs.returncode == 0:
                    log(f"--- logs of {n} (last lines)\n" + "\n".join((logs.stdout + logs.stderr).splitlines()[-30:]))
        engine.rm(*names)
        shutil.rmtree(work, ignore_errors=True)
        rt_cgroup_remove()
    took = time.monotonic() - t0
    print(f"{'FAILED: ' + ', '.join(c.failed) if c.failed else 'all image checks passed'} ({took:.0f} s)", flush=True)
    return 1 if c.failed else 0


def clean_keeps_an_image_in_use(engine: Engine, tag: str, name: str, c: Checks) -> None:
    """`make image-clean` beside a running container of the image (the deployed service, say): the image and the
    container stay (podman's forced rmi would have removed the container with the image)."""
    engine.run("run", "-d", "--name", name, "--entrypoint", "sleep", tag, "120")
    rc = clean(argparse.Namespace(tag=tag))
    running = engine.run("inspect", "--format", "{{.State.Running}}", name, check=False).stdout.strip()
    c.check("image-clean keeps an image a container uses, and the container", rc == 1 and engine.has_image(tag)
            and running == "true", f"clean returned {rc}, image kept {engine.has_image(tag)}, running {running!r}")
    engine.rm(name)


def image_contents(engine: Engine, tag: str, c: Checks) -> None:
    """The final image: no compilers, pip or test tools; the fdcontrol command runs as the non-root user."""
    probe = f"for t in {' '.join(FORBIDDEN)}; do command -v $t; done; id -u; fdcontrol --help >/dev/null && echo cli-ok"
    out = engine.run("run", "--rm", "--entrypoint", "sh", tag, "-c", probe, timeout=120).stdout.split()
    found = [x for x in out if x.startswith("/")]
    c.check("final image holds no compilers, pip or test tools", not found, ", ".join(found))
    c.check("runs as a non-root user, fdcontrol command works", "cli-ok" in out and "0" not in out, " ".join(out))


def main_container(engine: Engine, tag: str, name: str, shm: Path, c: Checks) -> list[float] | None:
    """The image as documented: a token, the published port, SYS_NICE. Health, a wrench round trip,
    SCHED_FIFO in /stats, a killed loop process restarted by the supervisor, SIGTERM shutdown."""
    token, port = secrets.token_hex(24), free_port()
    url = f"http://127.0.0.1:{port}"
    shm.chmod(0o1777)  # the container's /dev/shm, visible here: what is left after it stops
    engine.run("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8000", "-e", f"FDCONTROL_TOKEN={token}",
               "-e", f"FDCONTROL_COMMAND_TIMEOUT={TEST_TIMEOUT_S}",
               "--cap-add", "SYS_NICE", *rt_cgroup(), "-v", f"{shm}:/dev/shm", tag)
    up = wait_for(lambda: http("GET", url + "/health", token)[0] == 200, 90, 0.5)
    if not c.check("service healthy through the published port", up, str(http("GET", url + "/health", token))):
        return None
    status, _ = http("GET", url + "/state", None)
    c.check("the token is required off loopback", status == 401, f"GET /state without a token: {status}")
    # the HEALTHCHECK: podman runs it on demand; docker runs it every 10 s after start
    verdict = wait_for(lambda: (v := healthcheck(engine, name)) == "healthy" and v, 40, 1.0)
    c.check("HEALTHCHECK passes", verdict == "healthy", str(verdict))

    # wrench round trip: PUT a sequence-numbered wrench, read it back in the loop's state. The simulated
    # arm starts inside its workspace box (20 cm along x): the pushed tool may reach the box's wall and stop
    # there before the stream ends, so the wrench and the motion are looked for in every state read.
    _, s0 = http("GET", url + "/state", token)
    q_home = list(s0["q"]) if isinstance(s0, dict) else None
    seen: list[Any] = []
    code, ack, seq, st = stream_wrench(url, token, [20.0, 0.0, 0.0, 0.0, 0.0, 0.0], 50, seen)
    states = [x for x in seen if isinstance(x, dict) and "wrench" in x and "qd_ref" in x]
    applied = any(abs(x["wrench"][0] - 20.0) < 1.0 for x in states)
    moved = max((max(abs(v) for v in x["qd_ref"]) for x in states), default=0.0)
    ok = code == 200 and isinstance(st, dict) and 0 < st.get("seq_ack", 0) <= seq and applied and moved > 1e-4 \
        and st.get("fault") is None and st.get("watchdog") == "ok"
    detail = (f"PUT {code}; seq {seq} → seq_ack {st.get('seq_ack')}, the 20 N in a state: {applied}, "
              f"watchdog {st.get('watchdog')}, max|qd_ref| over {len(states)} states {moved:.3g}") \
        if isinstance(st, dict) else f"PUT {code} {ack}; state {st}"
    c.check("wrench round trip through the published port", ok, detail)

    _, stats = http("GET", url + "/stats", token)
    sched = stats.get("scheduler") if isinstance(stats, dict) else stats
    c.check("loop thread runs SCHED_FIFO with SYS_NICE (/stats)", sched == "SCHED_FIFO", f"scheduler: {sched}")

    # the default supervision: a killed loop process comes back (holding), the healthcheck passes again
    kill_loop(engine, name)
    back = wait_for(lambda: (h := http("GET", url + "/health", token))[0] == 200 and h[1].get("restarts", 0) >= 1
                    and h[1], 30, 0.2)
    c.check("killed loop process restarted by the supervisor", bool(back), str(back or http("GET", url + "/health",
                                                                                            token)))
    c.check("HEALTHCHECK passes after the restart", healthcheck(engine, name) == "healthy")

    # SIGTERM: the service stops within the documented grace, exit code 0, no shared memory left
    c.check("shared memory in use while running", any(shm.iterdir()), ", ".join(p.name for p in shm.iterdir()))
    t_term = time.monotonic()
    engine.run("kill", "--signal", "TERM", name)
    exit_code = engine.run("wait", name, timeout=STOP_GRACE_S * 6).stdout.strip().splitlines()[-1]
    took = time.monotonic() - t_term
    c.check(f"SIGTERM: exits with 0 within {STOP_GRACE_S:g} s", exit_code == "0" and took < STOP_GRACE_S,
            f"exit {exit_code} after {took:.1f} s")
    left = sorted(p.name for p in shm.iterdir())
    c.check("no shared memory left behind", not left, ", ".join(left))
    return q_home


def killed_loop_fails_healthcheck(engine: Engine, tag: str, name: str, c: Checks) -> None:
    """Without supervision a killed loop process stays dead: /health 503, the HEALTHCHECK fails and
    the engine marks the container unhealthy (what an orchestrator restarts on)."""
    token = secrets.token_hex(24)
    engine.run("run", "-d", "--name", name, "-e", f"FDCONTROL_TOKEN={token}", "-e", "FDCONTROL_SUPERVISE=false",
               "-e", f"FDCONTROL_COMMAND_TIMEOUT={TEST_TIMEOUT_S}", tag)
    verdict = wait_for(lambda: (v := healthcheck(engine, name)) == "healthy" and v, 90, 1.0)
    if not c.check("unsupervised container: HEALTHCHECK passes first", verdict == "healthy", str(verdict)):
        return
    kill_loop(engine, name)
    # podman: the check run now; docker: its verdict after the next checks (every 10 s, 3 retries)
    verdict = healthcheck(engine, name) if engine.name == "podman" else \
        wait_for(lambda: healthcheck(engine, name) == "unhealthy" and "unhealthy", 60, 2.0) or "healthy"
    c.check("HEALTHCHECK fails once the loop process is killed", verdict.startswith("unhealthy"), verdict)
    # the engine's verdict after `retries` (3) failed checks: podman counts on-demand runs, docker every 10 s
    status = wait_for(lambda: (healthcheck(engine, name), health_status(engine, name))[1] == "unhealthy"
                      and "unhealthy", 60, 1.0 if engine.name == "podman" else 2.0)
    c.check("the engine reports the container unhealthy", status == "unhealthy", health_status(engine, name))


def compose_ros2(engine: Engine, tag: str) -> dict[str, Any]:
    """compose.ros2.yaml as data (parsed by PyYAML inside the image: the host needs no Python packages)."""
    code = "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))"
    out = engine.run("run", "--rm", "-i", "--entrypoint", "python", tag, "-c", code,
                     input=(ROOT / "compose.ros2.yaml").read_text()).stdout
    return json.loads(out)


def ros2_next_to_driver(engine: Engine, tag: str, name: str, peer: str, q0: list[float] | None, c: Checks,
                        secrets_dir: Path) -> None:
    """compose.ros2.yaml's fdcontrol service (its environment, host networking, IPC, SYS_NICE) next to a
    second container playing the ROS 2 driver (tests/ros2_peer.py: ros2_control over Cyclone DDS),
    DDS pinned to loopback by the compose file's CYCLONEDDS_URI; a private domain and port."""
    doc = compose_ros2(engine, tag)
    svc = doc["services"]["fdcontrol"]
    env: dict[str, str] = {k: str(v) for k, v in svc["environment"].items()}
    uri = env["CYCLONEDDS_URI"]
    pinned = '<NetworkInterface name="lo"/>' in uri and "<AllowMulticast>false</AllowMulticast>" in uri \
        and '<Peer address="127.0.0.1"/>' in uri and svc.get("network_mode") == "host"
    if not c.check("compose.ros2.yaml pins DDS to loopback on host networking", pinned, uri):
        return  # never start DDS traffic that could leave the machine
    domain = 200 + os.getpid() % 30  # private: no cross-talk with a ROS graph or a parallel test run
    opts = json.loads(env["FDCONTROL_DRIVER_OPTIONS"])
    opts.update(domain_id=domain, connect_timeout=60, timeout=max(float(opts.get("timeout", 0.1)),
                                                                 float(TEST_TIMEOUT_S)))
    port, token = free_port(), secrets.token_hex(24)
    env.update(FDCONTROL_DRIVER_OPTIONS=json.dumps(opts), FDCONTROL_PORT=str(port),
               FDCONTROL_COMMAND_TIMEOUT=TEST_TIMEOUT_S)
    # the compose file's secrets (the API token file) as compose mounts them: /run/secrets/NAME
    mounts: list[str] = []
    for secret in svc.get("secrets", []):
        f = secrets_dir / str(secret)
        f.write_text(token + "\n")
        f.chmod(0o444)
        mounts += ["-v", f"{f}:/run/secrets/{secret}:ro"]
    if not mounts:
        env["FDCONTROL_TOKEN"] = token
    q0 = q0 or [0.0, -1.57, 1.57, -1.57, -1.57, 0.0]
    wrench_tool = [0.0] * 6  # the F/T sensor's reading (admittance mode uses the streamed wrench)
    engine.run("run", "-d", "--name", peer, "--network", "host", "-e", f"CYCLONEDDS_URI={uri}",
               "-v", f"{ROOT / 'tests'}:/peer/tests:ro", "-w", "/peer", "--entrypoint", "python", tag,
               "-m", "tests.ros2_peer", str(domain), opts.get("interface", "velocity"), json.dumps(q0),
               json.dumps(wrench_tool), "300")
    flags = [f"--{k}={v}" for k in ("network", "ipc") if (v := svc.get(f"{k}_mode" if k == "network" else k))]
    for cap in svc.get("cap_add", []):
        flags += ["--cap-add", cap]
    envs = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
    engine.run("run", "-d", "--name", name, *flags, *rt_cgroup(), *envs, *mounts, tag)
    url = f"http://127.0.0.1:{port}"
    up = wait_for(lambda: http("GET", url + "/health", token)[0] == 200, 120, 0.5)
    if not c.check("fdcontrol (ros2 driver) healthy next to the ROS 2 peer", up,
                   str(http("GET", url + "/health", token))):
        return
    status, _ = http("GET", url + "/state", None)
    c.check("the compose file's token (secret file) is required", status == 401,
            f"GET /state without a token: {status}")
    _, s0 = http("GET", url + "/state", token)
    near = isinstance(s0, dict) and max(abs(a - b) for a, b in zip(s0["q"], q0, strict=True)) < 0.05
    c.check("joint_states from the ROS side reach fdcontrol (by name)", near, f"q {s0.get('q') if near else s0}")
    code, body = http("POST", url + "/control/start", token)
    c.check("POST /control/start", code == 200, f"{code} {body}")
    # admittance (the compose file's mode): a wrench streamed to the API moves the arm; fdcontrol's velocity
    # commands reach the ROS side over DDS, which integrates them and publishes the new joint states back
    p0 = s0["tip_pose"] if isinstance(s0, dict) else None
    code, ack, seq, _ = stream_wrench(url, token, [0.0, 0.0, 20.0, 0.0, 0.0, 0.0], 60)
    _, st = http("GET", url + "/state", token)
    d = sum((st["tip_pose"][i][3] - p0[i][3]) ** 2 for i in range(3)) ** 0.5 \
        if isinstance(st, dict) and p0 is not None else 0.0
    c.check("a wrench streamed to the API moves the arm through the ROS side", code == 200 and d > 0.02 and
            isinstance(st, dict) and st.get("fault") is None and st.get("seq_ack", 0) > 0,
            f"PUT {code} ×{seq} {ack if code != 200 else ''}; tip moved {d:.3f} m (measured joint states), "
            f"fault {st.get('fault') if isinstance(st, dict) else st}")
    peer_q = [json.loads(ln[2:]) for ln in engine.run("logs", peer).stdout.splitlines() if ln.startswith("q ")]
    spread = max((abs(a - b) for a, b in zip(peer_q[-1], q0, strict=True)), default=0.0) if peer_q else 0.0
    c.check("the ROS side received fdcontrol's commands", spread > 1e-3, f"peer joints moved up to {spread:.3f} rad")
    _, stats = http("GET", url + "/stats", token)
    sched = stats.get("scheduler") if isinstance(stats, dict) else stats
    c.check("SCHED_FIFO with the compose file's SYS_NICE (/stats)", sched == "SCHED_FIFO", f"scheduler: {sched}")
    t_term = time.monotonic()
    engine.run("kill", "--signal", "TERM", name)
    exit_code = engine.run("wait", name, timeout=STOP_GRACE_S * 6).stdout.strip().splitlines()[-1]
    took = time.monotonic() - t_term
    c.check(f"ros2 service: SIGTERM exits with 0 within {STOP_GRACE_S:g} s",
            exit_code == "0" and took < STOP_GRACE_S, f"exit {exit_code} after {took:.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("image", help="build the image")
    b.add_argument("--tag", default=DEFAULT_TAG)
    b.add_argument("--base", default=DEFAULT_BASE)
    b.add_argument("--extras", default=DEFAULT_EXTRAS)
    t = sub.add_parser("test", help="check the built image")
    t.add_argument("--tag", default=DEFAULT_TAG)
    cl = sub.add_parser("clean", help="remove the image and the untagged images of earlier builds")
    cl.add_argument("--tag", default=DEFAULT_TAG)
    args = ap.parse_args(argv)
    return {"image": build, "test": test, "clean": clean}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
