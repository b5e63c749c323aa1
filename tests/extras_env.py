"""A Python environment that sees exactly what an install of fdcontrol with some extras brings: a venv
without pip whose only site directory links in, from the development environment, the distributions in
the closure of the declared requirements (each dependency's own requirements followed through its
metadata). Nothing is downloaded and nothing undeclared is visible, so a module that needs a package
the install would not bring fails here as it would on a fresh clone."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def declared(extras: Iterable[str]) -> list[Requirement]:
    """fdcontrol's core requirements and those of ``extras``, from pyproject.toml (an extra that names
    ``fdcontrol[…]`` is followed)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = project.get("optional-dependencies", {})
    out = [Requirement(r) for r in project["dependencies"]]
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        if extra not in optional:
            raise ValueError(f"pyproject.toml declares no extra {extra!r}")
        for r in map(Requirement, optional[extra]):
            if r.name == "fdcontrol":
                todo += sorted(r.extras)
            else:
                out.append(r)
    return out


def closure(requirements: Iterable[Requirement]) -> dict[str, importlib.metadata.Distribution]:
    """The requirements (markers evaluated without an extra) and theirs, as installed here."""
    seen: dict[str, importlib.metadata.Distribution] = {}

    def visit(req: Requirement) -> None:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            return
        dist = importlib.metadata.distribution(req.name)
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key not in seen:
            seen[key] = dist
            for r in dist.requires or []:
                visit(Requirement(r))

    for r in requirements:
        visit(r)
    return seen


def linked_venv(d: Path, dists: Iterable[importlib.metadata.Distribution]) -> Path:
    """A venv in ``d/venv`` that sees ``dists`` (linked from this environment into ``d/site``, whose
    ``.pth`` files run, as an install's do) and the standard library; its python."""
    farm = d / "site"
    farm.mkdir(parents=True)
    for dist in dists:
        for top in {Path(str(f)).parts[0] for f in dist.files or []} - {"..", "__pycache__"}:
            target = Path(str(dist.locate_file(top)))
            if target.exists() and not (farm / top).exists():
                (farm / top).symlink_to(target)
    venv = d / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(site) / "_fdcontrol_linked.pth").write_text(f"import site; site.addsitedir({str(farm)!r})\n")
    return py


def installed_fdcontrol() -> importlib.metadata.Distribution:
    """This environment's install of fdcontrol (editable, as `make` installs it: its finder maps
    ``fdcontrol.server`` to server/), not the egg-info a source checkout on sys.path may show."""
    found = [d for d in importlib.metadata.distributions(path=[sysconfig.get_paths()["purelib"]])
             if d.metadata["Name"] == "fdcontrol"]
    assert found, "fdcontrol is not installed in this environment"
    return found[0]
