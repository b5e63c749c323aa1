"""The learning interface end to end: gymnasium env → real service (uvicorn on loopback) → MuJoCo arm."""

from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pinocchio as pin
import pytest

gym = pytest.importorskip("gymnasium", reason="the env extra (gymnasium) is not installed")

from fdcontrol.env.service import ServiceEnv  # noqa: E402
from fdcontrol.env.spaces import ActionError, ActionSpec, pose7  # noqa: E402
from fdcontrol.model.robot import HOME  # noqa: E402
from fdcontrol.recording import COMMAND_TOPIC, EPISODE_TOPIC, STATE_TOPIC, read_recording  # noqa: E402
from tests.service import Service  # noqa: E402

RATE = 20.0
CONTACT = {"force_gain": [0.2] * 6}  # K_f·k/c small: contact settles (README, force control)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    d = tmp_path_factory.mktemp("rec")
    svc = Service(env={"FDCONTROL_RECORD_DIR": str(d)})
    svc.record_dir = d  # type: ignore[attr-defined]
    # these episodes reach past the simulated arm's start box (±20 cm around the start): none here
    svc.without_start_box()
    yield svc
    svc.stop()


def settle(env: ServiceEnv, seconds: float = 1.0) -> dict[str, np.ndarray]:
    """Policy steps of zero delta (the goal stays) for `seconds`; the last observation."""
    obs = None
    for _ in range(int(seconds * env.rate)):
        obs, *_ = env.step(np.zeros(env.action_space.shape))
    return obs  # type: ignore[return-value]


def test_delta_pose_base_frame_40_steps(service):
    env = ServiceEnv(service.url, rate=RATE)
    try:
        obs, _ = env.reset()
        p0 = obs["tip_pose"][:3].copy()
        for _ in range(40):
            obs, *_ = env.step(np.array([0.005, 0, 0, 0, 0, 0]))
        obs = settle(env)
        d = obs["tip_pose"][:3] - p0
        assert abs(d[0] - 0.200) <= 0.010, d
        assert math.hypot(d[1], d[2]) < 0.002, d
    finally:
        env.close()


def test_delta_pose_tool_frame_after_rotation(service):
    env = ServiceEnv(service.url, rate=RATE, action=ActionSpec(frame="tool"))
    try:
        env.reset()
        for _ in range(8):  # turn the tool 0.4 rad about its own x axis, then 0.24 rad about its y axis
            env.step(np.array([0, 0, 0, 0.05, 0, 0]))
        for _ in range(4):
            env.step(np.array([0, 0, 0, 0, 0.06, 0]))
        obs = settle(env, 1.0)
        T = np.asarray(env.client.state()["tip_pose"])
        R_home = env.home[:3, :3]
        turned = R_home @ pin.exp3(np.array([0.4, 0, 0])) @ pin.exp3(np.array([0, 0.24, 0]))
        assert np.linalg.norm(pin.log3(turned.T @ T[:3, :3])) < 0.01  # the tool did turn as commanded
        p0, axis = obs["tip_pose"][:3].copy(), T[:3, 0]  # the tool's x axis after the rotation
        for _ in range(40):
            obs, *_ = env.step(np.array([0.005, 0, 0, 0, 0, 0]))
        obs = settle(env)
        d = obs["tip_pose"][:3] - p0
        along = float(d @ axis)
        assert abs(along - 0.200) <= 0.010, (along, d)
        assert np.linalg.norm(d - along * axis) < 0.002, d
    finally:
        env.close()


def _press(env: ServiceEnv, depth: float) -> np.ndarray:
    """Goal: the tool's lowest point `depth` below the table top; the settled measured wrench."""
    objects = env.client.environment()["objects"]
    table = next(o for o in objects if o["name"] == "table")
    top = table["position"][2] + table["size"][2] / 2
    env.reset()
    gap = 0.05  # the default table lies 5 cm below the tool at home (fdcontrol.drivers.mujoco.TABLE_GAP)
    assert top < env.home[2, 3]
    goal = env.home.copy()
    goal[2, 3] -= gap + depth
    for _ in range(int(3 * env.rate)):
        env.step(pose7(goal))
    f = [env.step(pose7(goal))[0]["wrench"] for _ in range(10)]
    return np.array(f)


def test_reference_limiting_bounds_the_contact_force(service):
    k, b, kf = 200.0, 0.005, CONTACT["force_gain"][0]
    bound = k * b / kf  # documented: |f_i| ≤ K_p,i·b_i / K_f,i at rest in contact
    env = ServiceEnv(service.url, rate=RATE, action=ActionSpec(type="pose"),
                     config={**CONTACT, "stiffness": [k] * 3 + [50.0] * 3, "error_clip": [b] * 3 + [0.05] * 3})
    try:
        clipped = _press(env, 0.03)
        env.client.patch_config(error_clip=None)
        free = _press(env, 0.03)
    finally:
        env.client.patch_config(error_clip=None, force_gain=[1.0] * 6)
        env.close()
    fz_clip, fz_free = -clipped[:, 2], -free[:, 2]  # the tool pushes down on the table: f_z < 0
    assert np.all(fz_clip > 0.5 * bound), fz_clip  # in contact
    assert np.all(fz_clip <= bound * 1.02), (fz_clip, bound)  # settled at or below the bound
    assert np.ptp(fz_clip) < 0.05 * bound  # settled, not bouncing
    assert np.all(fz_free > 3 * bound), fz_free  # without clipping: the 3 cm error pushes far harder


def test_reset_returns_home(service):
    env = ServiceEnv(service.url, rate=RATE)
    try:
        env.reset()
        for _ in range(10):
            env.step(np.array([0.01, -0.01, 0.01, 0.05, 0, -0.05]))
        assert np.linalg.norm(np.asarray(env.client.state()["tip_pose"])[:3, 3] - env.home[:3, 3]) > 0.05
        obs, _ = env.reset()
        assert np.linalg.norm(obs["tip_pose"][:3] - env.home[:3, 3]) < 0.001
        assert np.max(np.abs(obs["q"] - np.array(HOME["ur10"]))) < 0.01  # the same joint configuration
    finally:
        env.close()


def test_gymnasium_env_checker(service, monkeypatch):
    """gymnasium's checker, all of it but its step-determinism check: the service runs real-time
    physics, so two runs of the same actions differ by the timing of each step (the in-process
    SimEnv, stepped in simulated time, passes that check too: tests/test_env_sim.py)."""
    from gymnasium.utils import env_checker

    skipped = []
    monkeypatch.setattr(env_checker, "check_step_determinism", lambda env: skipped.append(env))
    check_env = env_checker.check_env
    for spec in (ActionSpec(), ActionSpec(type="twist"), ActionSpec(type="joint_delta", max_joint_delta=0.02)):
        env = ServiceEnv(service.url, rate=50.0, action=spec, observe=("qd_ref", "sigma_min_j"))
        try:
            check_env(env, skip_render_check=True)
        finally:
            env.close()
    assert len(skipped) == 3


def test_bad_actions_are_rejected_without_motion(service):
    env = ServiceEnv(service.url, rate=RATE)
    try:
        env.reset()
        settle(env, 0.5)  # the tip at rest at home (reset returns within 0.5 mm, still settling)
        before = env.client.state()
        for bad in ([np.nan, 0, 0, 0, 0, 0], [0.0] * 5, [[0.0] * 6], [0.5, 0, 0, 0, 0, 0], "left", None,
                    [np.inf, 0, 0, 0, 0, 0]):
            with pytest.raises(ActionError):
                env.step(bad)
        # the same at the API: 422 with the reason, nothing reaches the loop
        h = httpx.Client(base_url=service.url)
        for body in ({"position": [float("nan"), 0, 0], "seq": 5}, {"position": [0.5, 0, 0]},
                     {"position": [0.5, 0, 0], "seq": 5, "step": 0}, {"position": [0.5, 0], "seq": 5},
                     {"position": [0.5, 0, 0], "orientation": [0, 0, 0, 2], "seq": 5}):
            r = h.put("/control/action", content=json.dumps(body),
                      headers={"content-type": "application/json"})
            assert r.status_code == 422, (body, r.text)
            assert r.json()["detail"]
        h.close()
        env.step(np.zeros(6))  # a valid action after the bad ones: the goal did not move
        after = settle(env, 0.5)
        s = env.client.state()
        assert s["action_seq"] != before["action_seq"]  # valid actions do arrive…
        moved = np.linalg.norm(after["tip_pose"][:3] - np.asarray(before["tip_pose"])[:3, 3])
        assert moved < 2e-4  # …and the rejected ones moved nothing
    finally:
        env.close()


def test_episode_export_aligned_with_the_recording(service, tmp_path):
    from fdcontrol.cli import main

    env = ServiceEnv(service.url, rate=RATE, episodes=True, task="push-x", policy_id="scripted-1")
    name = "episodes.mcap"
    env.client.start_recording(name)
    seen: list[list[int]] = []  # per episode: the cycle of the observation each action was chosen on
    try:
        _, info = env.reset()
        steps = [12, 7]
        for n in steps:
            seen.append([])
            for i in range(n):
                seen[-1].append(info["cycle"])
                _, _, _, _, info = env.step(np.array([0.002 * (i % 3), 0.001, 0, 0, 0, 0]))
            env.set_success(n == 12)
            _, info = env.reset()  # closes the episode, opens the next (left open: closed at close())
            if n == 12:
                env.client.patch_config(stiffness=[250.0] * 3 + [50.0] * 3)  # a change during episode 1
        env.end_episode(False)
    finally:
        env.client.stop_recording()
        env.client.patch_config(stiffness=[200.0] * 3 + [50.0] * 3)
        env.close()
    path = service.record_dir / name
    out = tmp_path / "ep.npz"
    assert main(["export", str(path), "--to", "npz", "--out", str(out)]) == 0
    data = np.load(out)
    assert int(data["episodes"]) == 3  # two with steps and the empty third
    rec = read_recording(path)
    states = {}
    for _, m in rec.messages[STATE_TOPIC]:
        states[m["cycle"]] = m  # one loop run: cycles are unique
    sent = [m["args"][0] for _, m in rec.messages[COMMAND_TOPIC] if m["command"] == "action"]
    by_seq = {a["seq"]: a for a in sent}
    for k, n in enumerate(steps):
        pre = f"episode_{k:03d}/"
        assert data[pre + "seq"].shape == (n,)  # one row per policy step
        assert data[pre + "action"].shape == (n, 6) and data[pre + "obs_q"].shape == (n, 6)
        meta = json.loads(str(data[pre + "meta"]))
        assert meta["task"] == "push-x" and meta["policy_id"] == "scripted-1" and meta["success"] == (n == 12)
        assert meta["metadata"]["action_type"] == "delta_pose"
        params = json.loads(str(data[pre + "params"]))
        assert params["stiffness"][0] == 200.0 and "error_clip" in params  # the parameters at its start
        for i in range(n):
            seq, cyc = int(data[pre + "seq"][i]), int(data[pre + "obs_cycle"][i])
            a = by_seq[seq]
            assert a["obs_cycle"] == cyc
            np.testing.assert_allclose(data[pre + "action"][i], [0.002 * (i % 3), 0.001, 0, 0, 0, 0])
            np.testing.assert_allclose(data[pre + "goal"][i], a["position"] + a["orientation"])
            s = states[cyc]
            np.testing.assert_allclose(data[pre + "obs_q"][i], s["q"])
            np.testing.assert_allclose(data[pre + "obs_wrench"][i], s["f_measured"])
            np.testing.assert_allclose(data[pre + "obs_tip_pose"][i, :3], np.asarray(s["tip_pose"])[:3, 3])
        # each row carries the observation the policy saw (the env's own record of it), and consecutive
        # observations are at least a policy period apart in loop cycles (500 Hz loop, 20 Hz policy):
        # the env waits for the end of each period; a policy starved on a loaded machine steps later
        # (the env re-anchors and counts late steps), never sooner
        assert data[pre + "obs_cycle"].tolist() == seen[k]
        gaps = np.diff(data[pre + "obs_cycle"][1:])  # the first one: the observation after reset()
        assert np.median(gaps) >= 500 / RATE - 2, gaps
    eps = [m for _, m in rec.messages[EPISODE_TOPIC]]
    assert [e["event"] for e in eps] == ["start", "stop"] * 3
    changes = json.loads(str(data["episode_001/param_changes"]))  # the change made during episode 1
    assert [c["changes"]["stiffness"][0] for c in changes] == [250.0]
    assert json.loads(str(data["episode_000/param_changes"])) == []
    assert json.loads(str(data["episode_002/params"]))["stiffness"][0] == 250.0
    pq = pytest.importorskip("pyarrow.parquet")
    assert main(["export", str(path), "--to", "parquet", "--out", str(tmp_path / "ep.parquet")]) == 0
    table = pq.read_table(tmp_path / "ep.parquet")
    assert table.num_rows == sum(steps)
    assert table.column("obs_cycle").to_pylist()[: steps[0]] == data["episode_000/obs_cycle"].tolist()
    meta = json.loads(table.schema.metadata[b"fdcontrol.episodes"])
    assert meta[2]["params"]["stiffness"][0] == 250.0


def test_creating_the_env_does_not_move_the_arm(service):
    """Selecting the compliance law must not pull the arm to a target left from before."""
    from fdcontrol.client import Client

    from .waits import cycles_later

    with Client(service.url) as c:
        c.patch_config(mode="admittance")
        T = np.asarray(c.state()["tip_pose"])
        c.set_target((T[:3, 3] + [0.05, 0.0, 0.0]).tolist())  # an old target 5 cm away, inactive in admittance
        before = np.asarray(c.state()["tip_pose"])[:3, 3]
        env = ServiceEnv(service.url, rate=RATE)
        try:
            # 250 cycles of the loop's own count (0.5 s at the service's 500 Hz), however loaded the machine
            after = np.asarray(cycles_later(c.state, 250)["tip_pose"])[:3, 3]
            assert np.linalg.norm(after - before) < 2e-4
        finally:
            env.close()
