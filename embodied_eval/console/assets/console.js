(function () {
  "use strict";
  var token = new URLSearchParams(window.location.search).get("token") || "";
  var $ = function (id) { return document.getElementById(id); };
  // Event-to-page latency (ms) of every event received, for benchmarks and tests.
  window.__consoleLatencies = [];
  window.__consoleEvents = 0;

  function nowMs() { return performance.timeOrigin + performance.now(); }
  function fmt(v, digits) {
    if (v === null || v === undefined || v === "") { return "—"; }
    return typeof v === "number" ? v.toFixed(digits === undefined ? 1 : digits) : String(v);
  }
  function duration(s) {
    if (s === null || s === undefined) { return "not running"; }
    if (s <= 0) { return "done"; }
    var m = Math.round(s / 60);
    return m < 60 ? m + " min" : Math.floor(m / 60) + " h " + (m % 60) + " min";
  }

  var storedManifests = [], lastRun = null;
  function showRun(run) {
    var parts;
    if (!run.run_id && (run.status || "idle") === "idle" && storedManifests.length) {
      // No run attached: the stored window, every manifest of it named.
      parts = ["stored window", storedManifests.map(function (m) {
        return m.name + " " + m.manifest_hash.slice(0, 12);
      }).join(", ")];
    } else {
      parts = ["run " + (run.run_id || "—"), "status " + (run.status || "idle")];
      if (run.manifest_hash) { parts.push("manifest " + run.manifest_hash.slice(0, 12)); }
    }
    lastRun = run;
    $("run-line").textContent = parts.join(" · ");
    document.body.dataset.runStatus = run.status || "idle";
    var live = run.status === "running" || run.status === "paused";
    $("stop").disabled = !live;
    $("pause").disabled = run.status !== "running";
    $("resume").disabled = run.status !== "paused";
  }

  function showWindow(w, version) {
    if (w.error) { $("progress").textContent = w.error; return; }
    $("manifests").innerHTML = w.html.manifests;
    $("families").innerHTML = w.html.families;
    storedManifests = w.manifests || [];
    if (lastRun) { showRun(lastRun); }
    $("progress").innerHTML = w.html.progress;
    $("stopping").innerHTML = w.html.stopping;
    $("episodes").innerHTML = w.html.episodes;
    $("incidents").innerHTML = w.html.incidents;
    var sides = $("sides");
    sides.textContent = "";
    Object.keys(w.sides).forEach(function (side) {
      var s = w.sides[side], div = document.createElement("div");
      div.dataset.side = side;
      div.innerHTML = "<small></small><b></b><small></small>";
      div.children[0].textContent = side;
      div.children[1].textContent = s.done + " / " + s.planned;
      div.children[2].textContent = "ETA " + duration(s.eta_s);
      sides.appendChild(div);
    });
    // Recorded files: followed with this page's own token (the store's view is shared).
    var links = document.querySelectorAll('a[href^="/files/"]');
    for (var i = 0; i < links.length; i++) {
      links[i].href = links[i].getAttribute("href") + "?token=" + encodeURIComponent(token);
    }
    document.body.dataset.stateVersion = String(version);
  }

  function showReal(r) {
    $("real-episode").textContent = r.episode_id || "—";
    $("real-phase").textContent = r.phase ? "(" + r.phase + (r.status ? ": " + r.status : "") + ")" : "";
    document.body.dataset.realPhase = r.phase || "";
    $("force").textContent = fmt(r.force_n);
    $("force-limit").textContent = fmt(r.force_limit_n, 0);
    $("peak-force").textContent = fmt(r.peak_force_n);
    var meter = $("force-meter");
    meter.max = r.force_limit_n || 150;
    meter.high = 0.8 * meter.max;
    meter.value = r.force_n || 0;
    $("latency").textContent = fmt(r.latency_ms, 2);
    $("latency-p99").textContent = fmt(r.latency_p99_ms, 2);
    $("misses").textContent = fmt(r.deadline_misses, 0);
    var dead = $("deadman");
    dead.textContent = r.heartbeat === undefined ? "—" :
      (r.heartbeat ? "heartbeat on" : "heartbeat off") + (r.supervised === false ? " · robot unsupervised" : "");
    dead.className = r.heartbeat ? "on" : "off";
    $("robot-mode").textContent = r.robot_mode || "—";
    var ps = $("protective-stop");
    ps.textContent = r.protective_stop === undefined ? "—" : (r.protective_stop ? "ACTIVE" : "clear");
    ps.className = r.protective_stop ? "off" : "on";
    $("emergency-stop").textContent = r.emergency_stop ? "ACTIVE" : "clear";
    var names = r.joint_names || [], rows = ["<tr><th>joint</th><th>commanded</th><th>measured</th></tr>"];
    for (var i = 0; i < names.length; i++) {
      var c = r.commanded ? r.commanded[i] : null, m = r.measured ? r.measured[i] : null;
      rows.push("<tr><td></td><td class=num>" + fmt(c, 4) + "</td><td class=num>" + fmt(m, 4) + "</td></tr>");
    }
    $("joints").innerHTML = "<table>" + rows.join("") + "</table>";
    var cells = $("joints").querySelectorAll("tr td:first-child");
    for (var k = 0; k < cells.length; k++) { cells[k].textContent = names[k]; }
  }

  function describe(e) {
    switch (e.kind) {
      case "episode": return "stored " + e.episode_id + ": " + e.status + (e.status === "ok" ? (e.success ? " (success)" : " (failure)") : "") + (e.status_reason ? " — " + e.status_reason : "");
      case "real_episode": return "real " + e.episode_id + " " + e.phase + (e.status ? ": " + e.status : "") + (e.abort_cause ? " (" + e.abort_cause + ")" : "");
      case "safety": return "safety event " + e.event_kind + " in " + e.episode_id + (e.detail ? ": " + e.detail : "");
      case "operator": return e.action + " asked by " + e.by + " (" + e.via + ")" + (e.record_id ? ", ledger " + e.record_id : "");
      case "stopping": return "anytime stopping: " + e.decision + " — " + e.reason;
      case "run": return "run " + e.status;
      default: return e.kind;
    }
  }

  function addEvent(e, live) {
    if (live && e.t_ns) { window.__consoleLatencies.push(nowMs() - e.t_ns / 1e6); }
    window.__consoleEvents += 1;
    var li = document.createElement("li");
    li.className = e.kind;
    li.dataset.seq = String(e.seq);
    li.textContent = new Date(e.t_ns / 1e6).toLocaleTimeString() + " " + describe(e);
    var feed = $("feed");
    feed.insertBefore(li, feed.firstChild);
    while (feed.children.length > 200) { feed.removeChild(feed.lastChild); }
    document.body.dataset.lastEvent = String(e.seq);
  }

  function connect() {
    var source = new EventSource("/api/events?token=" + encodeURIComponent(token));
    source.addEventListener("open", function () { document.body.dataset.connected = "yes"; });
    source.addEventListener("error", function () { document.body.dataset.connected = "no"; });
    source.addEventListener("state", function (m) {
      var d = JSON.parse(m.data);
      if (d.user) { $("user").textContent = d.user; }
      showRun(d.run);
      showWindow(d.window, d.version);
      if (d.real) { showReal(d.real); }
      (d.events || []).forEach(function (e) { addEvent(e, false); });
    });
    // The run's status on every change (the first `state` holds it at connect).
    source.addEventListener("run", function (m) { showRun(JSON.parse(m.data)); });
    source.addEventListener("real", function (m) { showReal(JSON.parse(m.data)); });
    source.addEventListener("frame", function (m) {
      var d = JSON.parse(m.data);
      $("camera").src = d.uri;
      $("frame-count").textContent = String(d.count);
      document.body.dataset.frame = String(d.count);
    });
    source.addEventListener("event", function (m) { addEvent(JSON.parse(m.data), true); });
  }

  function ask(action) {
    var note = $("control-note");
    note.textContent = action + "…";
    return fetch("/api/" + action, {
      method: "POST",
      headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json", "X-Console-Via": "page"},
      body: "{}"
    }).then(function (r) { return r.json().then(function (d) { return [r.status, d]; }); })
      .then(function (res) {
        note.textContent = res[0] === 200 ? action + " recorded (" + res[1].record_id + ")" : res[1].error;
        document.body.dataset.lastControl = action + ":" + res[0];
      });
  }

  $("stop").addEventListener("click", function () {
    if (window.confirm("Stop the run now? The real episode in progress is aborted and the robot holds where it is (safe-stop hold). Re-run the same command to continue later.")) {
      // When the stop was confirmed (wall clock, ms): what a hold's latency is measured from.
      document.body.dataset.stopConfirmedMs = String(nowMs());
      ask("stop");
    }
  });
  $("pause").addEventListener("click", function () { ask("pause"); });
  $("resume").addEventListener("click", function () { ask("resume"); });
  connect();
})();
