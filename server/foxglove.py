"""Foxglove live: a Foxglove WebSocket server (Foxglove's SDK, ``foxglove-sdk``) showing the arm in 3-D.

``fdcontrol serve --foxglove PORT`` starts it beside the REST service, in the API process. A thread
reads the loop's newest published state from shared memory (``LoopWorker.state``, as /ws/state does)
at ``foxglove_rate`` and logs the messages of :class:`fdcontrol.viz.scene.Scene` on the SDK's
channels; the SDK sends them from its own threads, dropping the oldest for a client that lags
(``message_backlog_size``). The loop never waits for it, and neither does the API: a stuck viewer
fills only its own queue.

Access: the Foxglove WebSocket protocol has no authentication, and the SDK offers none (no token,
no handshake hook; TLS only). So the server binds loopback unless ``foxglove_host`` names another
address *and* ``foxglove_remote`` is set; reach it from elsewhere through an SSH tunnel.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import foxglove

from fdcontrol.viz.scene import DESCRIPTION_TOPIC, Scene, schemas

DESCRIPTION_EVERY = 2.0  # s: the robot description again, for viewers that subscribe later
VOLUMES_EVERY = 0.1  # s: the volume entities (their colours follow the tip's distance)


class FoxgloveLive:
    """The Foxglove server and its publishing thread; ``worker`` returns the current LoopWorker."""

    def __init__(self, worker: Callable[[], Any], host: str, port: int, rate: float = 50.0,
                 name: str = "fdcontrol") -> None:
        self._worker, self.rate = worker, rate
        self.context = foxglove.Context()  # only this server's channels
        self.channels = {
            topic: foxglove.Channel(topic, schema=foxglove.Schema(name=sname, encoding="jsonschema",
                                                                  data=json.dumps(schema).encode()),
                                    message_encoding="json", context=self.context)
            for topic, (sname, schema) in schemas().items()}
        self.scene = Scene(worker().params)
        self._params_seen: dict[str, Any] = dict(worker().params)
        self._stop = threading.Event()
        self._subscribed = threading.Event()  # a client subscribed: send the description at once
        self.published = 0
        self.errors = 0
        listener = _Listener(self._subscribed)
        self.server = foxglove.start_server(name=name, host=host, port=port, context=self.context,
                                            server_listener=listener, message_backlog_size=64)
        self.port = self.server.port
        self._thread = threading.Thread(target=self._run, name="fdcontrol-foxglove", daemon=True)
        self._thread.start()

    def _log(self, topic: str, msg: dict[str, Any], ns: int) -> None:
        self.channels[topic].log(json.dumps(msg, allow_nan=False).encode(), log_time=ns)

    def _run(self) -> None:
        period = 1.0 / self.rate
        next_at = time.monotonic()
        last_desc = last_vol = -1e9
        while not self._stop.is_set():
            try:
                w = self._worker()
                p = w.params
                if p != self._params_seen:  # a configuration change (volumes, robot after a restart)
                    self._params_seen = dict(p)
                    if (p["robot"], p.get("base"), p.get("tip")) != (self.scene.params["robot"],
                                                                     self.scene.params.get("base"),
                                                                     self.scene.params.get("tip")):
                        self.scene = Scene(p)
                        last_desc = -1e9
                    else:
                        self.scene.update(p)
                s, _ = w.state()
                now, ns = time.monotonic(), time.time_ns()
                if self._subscribed.is_set() or now - last_desc >= DESCRIPTION_EVERY:
                    self._subscribed.clear()
                    self._log(DESCRIPTION_TOPIC, self.scene.robot_description(), ns)
                    last_desc = now
                if len(s.q) == self.scene.robot.dof:
                    volumes = now - last_vol >= VOLUMES_EVERY
                    target = getattr(w, "last_target", None)
                    for topic, msg in self.scene.messages(s, ns, target, volumes=volumes).items():
                        self._log(topic, msg, ns)
                    if volumes:
                        last_vol = now
                    self.published += 1
            except Exception:  # a restarting loop process, a torn read: try again next tick
                self.errors += 1
            next_at = max(next_at + period, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def status(self) -> dict[str, Any]:
        return {"port": self.port, "rate": self.rate, "published": self.published, "errors": self.errors}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self.server.stop()


class _Listener:
    """The SDK's server listener: a new subscription asks for the robot description at once."""

    def __init__(self, subscribed: threading.Event) -> None:
        self._subscribed = subscribed

    def on_subscribe(self, client: Any, channel: Any) -> None:
        if channel.topic == DESCRIPTION_TOPIC:
            self._subscribed.set()



def layout() -> str:
    """The shipped Foxglove layout (server/static/foxglove-layout.json): the arm in 3-D from
    ``/robot_description`` and ``/tf`` with the volumes, wrench arrows and target; plots of the
    Jacobian's singular values and of the safety state; the telemetry as raw messages."""
    import foxglove.layouts as fl

    from fdcontrol.viz.scene import TARGET_TOPIC, TELEMETRY_TOPIC, VOLUMES_TOPIC, WRENCH_TOPIC

    three = fl.ThreeDeePanel(title="arm", config=fl.ThreeDeeConfig(
        layers={"grid": fl.BaseRendererGridLayerSettings(instance_id="grid", label="Grid", visible=True),
                "urdf": fl.BaseRendererUrdfLayerSettings(instance_id="urdf", label="fdcontrol arm", visible=True,
                                                         source_type="topic", topic=DESCRIPTION_TOPIC,
                                                         control_mode="transforms", display_mode="auto")},
        topics={t: fl.BaseRendererSceneUpdateTopicSettings(visible=True) for t in (VOLUMES_TOPIC, WRENCH_TOPIC)}
        | {TARGET_TOPIC: fl.BaseRendererPoseTopicSettings(visible=True)},
        camera_state=fl.ThreeDeeCameraState(distance=3.5, perspective=True, phi=60.0, theta_offset=45.0,
                                            target_offset=[0.0, 0.0, 0.5])))
    sv = fl.PlotPanel(title="singular values of J", config=fl.PlotConfig(paths=[
        fl.PlotSeries(value=f"{TELEMETRY_TOPIC}.singular_values[{i}]", label=f"σ{i + 1}", enabled=True)
        for i in range(6)] + [fl.PlotSeries(value=f"{TELEMETRY_TOPIC}.sigma_min", label="σmin (loop)",
                                            enabled=True)]))
    safety = fl.PlotPanel(title="safety", config=fl.PlotConfig(paths=[
        fl.PlotSeries(value=f"{TELEMETRY_TOPIC}.hold", label="holding", enabled=True),
        fl.PlotSeries(value=f"{TELEMETRY_TOPIC}.limits_active_count", label="limits active", enabled=True),
        fl.PlotSeries(value=f"{TELEMETRY_TOPIC}.workspace_distance", label="workspace distance (m)", enabled=True),
        fl.PlotSeries(value=f"{TELEMETRY_TOPIC}.force_measured", label="‖F measured‖ (N)", enabled=True),
        fl.PlotSeries(value=f"{TELEMETRY_TOPIC}.force_commanded", label="‖F commanded‖ (N)", enabled=True)]))
    raw = fl.RawMessagesPanel(title="telemetry", config=fl.RawMessagesConfig(topic_path=TELEMETRY_TOPIC))
    content = fl.SplitContainer(direction="row", items=[
        fl.SplitItem(proportion=2, content=three),
        fl.SplitItem(proportion=1, content=fl.SplitContainer(direction="column", items=[
            fl.SplitItem(proportion=1, content=sv), fl.SplitItem(proportion=1, content=safety),
            fl.SplitItem(proportion=1, content=raw)]))])
    return fl.Layout(content=content).to_json()
