// fluidbox approvals page. Plain JS, no framework, public API only.
//
// Security: everything shown comes from the API and may come from an agent
// (tool inputs, tool names), so it is only ever set with textContent on
// elements built here; this file never assigns HTML. The Content-Security-
// Policy allows scripts and styles from this origin only and connections
// to it. The token lives in this tab's sessionStorage and goes only into
// the Authorization header of requests to the same origin.
"use strict";

(function () {
  const TOKEN_KEY = "fluidbox.token";
  const RUN_KEY = "fluidbox.run";
  const POLL_MS = 2000;

  const $ = (id) => document.getElementById(id);

  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  function token() {
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // api calls the public API relative to this page, so the page works at
  // "/" and under an API Gateway stage prefix alike.
  async function api(method, path, body, signal) {
    const headers = { Authorization: "Bearer " + token(), Accept: "application/json" };
    const init = { method, headers, signal, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (err) {
      if (err && err.name === "AbortError") throw err;
      throw new APIError(0, "unreachable", "cannot reach the control plane");
    }
    let data = null;
    try {
      data = await resp.json();
    } catch (_) {
      data = null;
    }
    if (!resp.ok) {
      const e = data && data.error ? data.error : {};
      throw new APIError(resp.status, e.code || "http_" + resp.status, e.message || resp.statusText);
    }
    return data;
  }

  function setConn(text, cls) {
    const c = $("conn");
    c.textContent = text;
    c.className = "conn " + (cls || "");
  }

  function notice(text, cls) {
    const n = $("notice");
    n.textContent = text;
    n.className = "notice " + (cls || "");
  }

  // handleError reacts to a failed call; it returns true if the token was refused.
  function handleError(err) {
    if (err instanceof APIError && err.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showToken("The server refused that token. Enter the admin token or an SSO bearer.");
      return true;
    }
    if (err instanceof APIError && err.status === 0) {
      setConn("cannot reach the control plane; retrying…", "bad");
    } else if (err instanceof APIError) {
      setConn(err.status + " " + err.code + ": " + err.message, "bad");
    }
    return false;
  }

  // ---- token ----

  function showToken(message) {
    $("token-panel").hidden = false;
    $("app").hidden = true;
    $("token-forget").hidden = true;
    setConn(message || "not connected", message ? "bad" : "");
    stopAll();
    $("token").focus();
  }

  function start() {
    $("token-panel").hidden = true;
    $("app").hidden = false;
    $("token-forget").hidden = false;
    setConn("connecting…");
    pollApprovals();
    const run = sessionStorage.getItem(RUN_KEY);
    if (run) {
      $("run-id").value = run;
      followRun(run);
    }
  }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token").value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    $("token").value = "";
    start();
  });

  $("token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    showToken();
  });

  // ---- attention strip ----

  let pollTimer = null;
  let pollGen = 0;
  let approvals = [];

  function stopAll() {
    pollGen++;
    clearTimeout(pollTimer);
    stopRun();
  }

  async function pollApprovals() {
    const gen = ++pollGen;
    clearTimeout(pollTimer);
    try {
      const data = await api("GET", "v1/approvals");
      if (gen !== pollGen) return;
      approvals = (data && data.approvals) || [];
      setConn("connected", "ok");
      renderApprovals();
    } catch (err) {
      if (gen !== pollGen) return;
      if (handleError(err)) return;
    }
    pollTimer = setTimeout(pollApprovals, POLL_MS);
  }

  function inputText(input) {
    if (input && typeof input === "object") {
      for (const k of ["command", "file_path", "path", "url"]) {
        if (typeof input[k] === "string" && input[k] !== "") {
          const rest = Object.assign({}, input);
          delete rest[k];
          const extra = Object.keys(rest).length ? "\n" + JSON.stringify(rest, null, 2) : "";
          return input[k] + extra;
        }
      }
    }
    return JSON.stringify(input, null, 2);
  }

  function timeLeft(expiresAt) {
    const ms = Date.parse(expiresAt) - Date.now();
    if (!(ms > 0)) return "expired";
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    const pad = (n) => String(n).padStart(2, "0");
    return (h ? h + ":" + pad(m) : String(m)) + ":" + pad(sec) + " left";
  }

  function renderApprovals() {
    const list = $("attention");
    const keep = new Map();
    for (const li of Array.from(list.children)) keep.set(li.dataset.approvalId, li);
    const ids = new Set(approvals.map((a) => a.id));
    for (const [id, li] of keep) if (!ids.has(id)) li.remove();
    for (const a of approvals) {
      if (keep.has(a.id)) continue; // an approval never changes while pending
      list.appendChild(approvalCard(a));
    }
    $("pending-count").textContent = String(approvals.length);
    $("attention-empty").hidden = approvals.length > 0;
    tick();
  }

  function approvalCard(a) {
    const li = el("li", "approval");
    li.dataset.approvalId = a.id;
    li.dataset.expiresAt = a.expires_at;
    const head = el("div", "head");
    head.appendChild(el("span", "tool", a.tool_name));
    head.appendChild(el("span", "meta", "rule " + (a.rule_id || "(default)")));
    head.appendChild(el("span", "meta", "run " + a.session_id));
    head.appendChild(el("span", "meta", a.id));
    head.appendChild(el("span", "left", timeLeft(a.expires_at)));
    li.appendChild(head);
    li.appendChild(el("pre", "input", inputText(a.input)));
    const actions = el("div", "actions");
    const buttons = [
      ["approve-once", "Approve once", "approved_once"],
      ["approve-session", "Approve for run", "approved_session"],
      ["deny", "Deny", "denied"],
    ];
    for (const [cls, label, decision] of buttons) {
      const b = el("button", cls, label);
      b.type = "button";
      b.addEventListener("click", () => decide(a, decision, li));
      actions.appendChild(b);
    }
    li.appendChild(actions);
    return li;
  }

  async function decide(a, decision, li) {
    for (const b of li.querySelectorAll("button")) b.disabled = true;
    try {
      const res = await api("POST", "v1/approvals/" + encodeURIComponent(a.id) + "/decision", { decision });
      if (res.applied) {
        notice(a.id + " " + res.status + ": applied (" + a.tool_name + ")", "ok");
      } else {
        notice(a.id + " was already " + res.status + (res.decided_by ? " by " + res.decided_by : ""), "bad");
      }
      li.remove();
      approvals = approvals.filter((x) => x.id !== a.id);
      $("pending-count").textContent = String(approvals.length);
      $("attention-empty").hidden = approvals.length > 0;
    } catch (err) {
      if (handleError(err)) return;
      notice("could not decide " + a.id + ": " + err.message, "bad");
      for (const b of li.querySelectorAll("button")) b.disabled = false;
    }
    pollApprovals();
  }

  function tick() {
    for (const li of $("attention").children) {
      const left = li.querySelector(".left");
      const text = timeLeft(li.dataset.expiresAt);
      left.textContent = text;
      left.classList.toggle("expired", text === "expired");
    }
  }
  setInterval(tick, 1000);

  // ---- timeline ----

  let runCtl = null;

  function stopRun() {
    if (runCtl) runCtl.abort();
    runCtl = null;
  }

  $("run-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = $("run-id").value.trim();
    if (!id) return;
    sessionStorage.setItem(RUN_KEY, id);
    followRun(id);
  });

  function describe(e) {
    const d = e.data || {};
    const j = (...parts) => parts.filter((p) => p !== undefined && p !== null && p !== "").join(" ");
    switch (e.type) {
      case "session.created":
        return j("policy", d.policy_id, "v" + d.policy_version + ",", d.tools, "tools, trust", d.trust_tier + (d.autonomous ? ", autonomous" : "") + ",", d.trigger ? "trigger " + d.trigger : "", d.invoker ? "by " + d.invoker : "");
      case "tool.requested":
        return j(d.tool_call_id, d.tool_name);
      case "tool.decision": {
        const why = [d.source, d.rule_id && "rule " + d.rule_id, d.approval_id && "approval " + d.approval_id, d.grant && "grant " + d.grant].filter(Boolean);
        const rw = d.rewritten_verdict ? "[" + d.verdict + " rewritten to " + d.rewritten_verdict + "]" : "";
        return j(d.tool_call_id, d.tool_name, "→", d.decision, rw, why.length ? "(" + why.join(", ") + ")" : "");
      }
      case "approval.requested":
        return j(d.approval_id, d.tool_call_id, d.tool_name, d.rule_id && "rule " + d.rule_id, d.default_scope && "scope " + d.default_scope, "expires " + new Date(d.expires_at).toLocaleTimeString());
      case "approval.decided":
        return j(d.approval_id, d.tool_call_id, d.status, d.decided_by && "by " + d.decided_by);
      case "session.ended":
        return j(d.ended_by && "by " + d.ended_by);
      case "grant.revoked":
        return j(d.scope_key, d.revoked_by && "by " + d.revoked_by);
    }
    return JSON.stringify(d);
  }

  function addEvent(e) {
    const mark = (e.data && (e.data.decision || e.data.status)) || "";
    const tr = el("tr", ["allow", "deny", "pending", "denied"].includes(mark) ? mark : "");
    tr.dataset.seq = String(e.seq);
    tr.appendChild(el("td", "", e.seq));
    tr.appendChild(el("td", "", new Date(e.at).toLocaleTimeString()));
    tr.appendChild(el("td", "type", e.type));
    tr.appendChild(el("td", "what", describe(e)));
    $("timeline-body").appendChild(tr);
  }

  async function followRun(id) {
    stopRun();
    const ctl = new AbortController();
    runCtl = ctl;
    $("timeline-body").replaceChildren();
    const status = $("run-status");
    status.textContent = "following " + id + "…";
    let after = 0;
    let backoff = 500;
    while (!ctl.signal.aborted) {
      try {
        const path = "v1/sessions/" + encodeURIComponent(id) + "/events?after=" + after + "&limit=500&wait_seconds=25";
        const page = await api("GET", path, undefined, ctl.signal);
        if (ctl.signal.aborted) return;
        for (const e of page.events || []) {
          if (e.seq <= after) continue; // each event once
          addEvent(e);
          after = e.seq;
        }
        status.textContent = "following " + id + " · last seq " + after;
        backoff = 500;
      } catch (err) {
        if (ctl.signal.aborted || (err && err.name === "AbortError")) return;
        if (handleError(err)) return;
        if (err instanceof APIError && err.status >= 400 && err.status < 500) {
          status.textContent = id + ": " + err.message;
          return;
        }
        status.textContent = "connection lost; resuming after seq " + after + "…";
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10000);
      }
    }
  }

  // ---- boot ----

  if (token()) start();
  else showToken();
})();
