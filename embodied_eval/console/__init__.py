"""The live run console: watch a window's progress and a running harness from a browser, and stop
or pause the run.

- `embodied_eval.live_channel.LiveState` (below the console, the runner and the robot side): what a
  running harness publishes (progress events, the real episode in progress, camera frames, ROS
  messages) and the operator's stop/pause requests; the runner and the robot backend write into
  it, the console and the Foxglove publisher read it. `frames.frame_jpeg` encodes its camera
  frame for the page.
- `window.window_view`: the window's numbers read from the store, read-only.
- `app.ConsoleServer` and `routes`: the web app (token, JSON API, server-sent events,
  stop/pause) and its page (`assets/`).
- `foxglove_live.FoxgloveLive`: the same live channels over foxglove-sdk's WebSocket server,
  behind `foxglove_gate.FoxgloveGate` (the token check the SDK's server lacks).
- `access`: the operators and their tokens, where the servers may listen, the token file and
  the redaction of tokens in logs.
"""
