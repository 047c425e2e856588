// fluidbox approvals page. Plain JS, no framework, public API only.
//
// Security: everything shown comes from the API and may come from an agent
// (tool inputs, tool names, repository names), so it is rendered by
// render.js (every invisible or control character escaped) and only ever
// set with textContent on elements built here; this file never assigns
// HTML. The Content-Security-Policy allows scripts and styles from this
// origin only, and connections to it and (with SSO) the issuer's token
// endpoint. Tokens live in this tab's sessionStorage and go only into the
// Authorization header of requests to this origin; never into a URL.
"use strict";

(function () {
  const R = window.fluidboxRender;
  const TOKEN_KEY = "fluidbox.token";
  const PKCE_KEY = "fluidbox.signin";
  const RUN_KEY = "fluidbox.run";
  const POLL_MS = 2000;
  // How much of an input a card shows before "Show all".
  const CLIP_CHARS = 1500;
  const CLIP_LINES = 24;

  const $ = (id) => document.getElementById(id);

  function el(tag, className, text) {
    const e = document.createElement(tag);
    if (className) e.className = className;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  let config = { sign_in: "token" };

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
  // "/" and under an API Gateway stage prefix alike. Numbers keep their
  // source text (render.js's parse), so inputs show as written.
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
      data = R.parse(await resp.text());
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
      signedOut(config.sign_in === "sso" ? "Your sign-in has ended; sign in again." : "The server refused that token.");
      return true;
    }
    if (err instanceof APIError && err.status === 0) {
      setConn("cannot reach the control plane; retrying…", "bad");
    } else if (err instanceof APIError) {
      setConn(err.status + " " + err.code + ": " + R.line(err.message), "bad");
    }
    return false;
  }

  // ---- signing in ----

  function b64url(bytes) {
    let s = "";
    for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
    return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  function randomString(n) {
    return b64url(crypto.getRandomValues(new Uint8Array(n)));
  }

  // claims reads a JWT's payload to show who is signed in and when the
  // sign-in ends. The server verifies the token; this only displays it.
  function claims(jwt) {
    try {
      const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      const bin = atob(part + "=".repeat((4 - (part.length % 4)) % 4));
      return JSON.parse(new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0))));
    } catch (_) {
      return null;
    }
  }

  function redirectURI() {
    return location.origin + location.pathname;
  }

  // signIn sends the browser to the issuer: authorization code with PKCE
  // (S256), a fresh state and nonce kept in sessionStorage until it comes
  // back.
  async function signIn() {
    const o = config.oidc;
    const verifier = randomString(32);
    const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
    const pending = { verifier, state: randomString(16), nonce: randomString(16) };
    sessionStorage.setItem(PKCE_KEY, JSON.stringify(pending));
    const u = new URL(o.authorization_endpoint);
    u.searchParams.set("response_type", "code");
    u.searchParams.set("client_id", o.client_id);
    u.searchParams.set("redirect_uri", redirectURI());
    u.searchParams.set("scope", "openid email profile");
    u.searchParams.set("state", pending.state);
    u.searchParams.set("nonce", pending.nonce);
    u.searchParams.set("code_challenge", challenge);
    u.searchParams.set("code_challenge_method", "S256");
    location.assign(u.toString());
  }

  // completeSignIn handles the issuer's redirect back: the code leaves the
  // address bar at once, the state must be the one sent, the code is
  // redeemed with the PKCE verifier, and the ID token's nonce must be ours.
  async function completeSignIn(params) {
    history.replaceState(null, "", location.pathname + location.hash);
    const pending = JSON.parse(sessionStorage.getItem(PKCE_KEY) || "null");
    sessionStorage.removeItem(PKCE_KEY);
    if (params.get("error")) throw new Error("the identity provider said: " + R.line(params.get("error")));
    if (!pending || params.get("state") !== pending.state) throw new Error("the sign-in response does not match a sign-in started here");
    const o = config.oidc;
    const form = new URLSearchParams({
      grant_type: "authorization_code",
      code: params.get("code") || "",
      redirect_uri: redirectURI(),
      client_id: o.client_id,
      code_verifier: pending.verifier,
    });
    let resp;
    try {
      resp = await fetch(o.token_endpoint, { method: "POST", body: form, cache: "no-store", credentials: "omit" });
    } catch (_) {
      throw new Error("cannot reach the identity provider");
    }
    const data = await resp.json().catch(() => null);
    const idToken = data && typeof data.id_token === "string" ? data.id_token : "";
    if (!resp.ok || !idToken) throw new Error("the identity provider refused the sign-in" + (data && data.error ? ": " + R.line(String(data.error)) : ""));
    const c = claims(idToken);
    if (!c || c.nonce !== pending.nonce) throw new Error("the identity provider's answer is not for this sign-in");
    sessionStorage.setItem(TOKEN_KEY, idToken);
  }

  function who() {
    const c = claims(token());
    if (!c) return null;
    const name = c.email || c.preferred_username || c.name || c.sub || "?";
    const roles = (config.oidc && Array.isArray(c[config.oidc.roles_claim]) ? c[config.oidc.roles_claim] : []).filter((r) => typeof r === "string");
    return { name: String(name), roles, exp: typeof c.exp === "number" ? c.exp : 0 };
  }

  function signedOut(message) {
    stopAll();
    $("app").hidden = true;
    $("sign-out").hidden = true;
    $("who").textContent = "";
    const sso = config.sign_in === "sso";
    $("token-panel").hidden = sso || config.sign_in === "unavailable";
    $("sso-panel").hidden = !sso;
    $("unavailable-panel").hidden = config.sign_in !== "unavailable";
    setConn(message || "not signed in", message ? "bad" : "");
    if (sso) {
      $("sso-issuer").textContent = R.line(config.oidc.issuer);
      $("sign-in").focus();
    } else if (config.sign_in === "token") {
      $("token").focus();
    }
  }

  function start() {
    $("token-panel").hidden = true;
    $("sso-panel").hidden = true;
    $("unavailable-panel").hidden = true;
    $("app").hidden = false;
    $("sign-out").hidden = false;
    if (config.sign_in === "sso") {
      const w = who();
      $("who").textContent = w ? "signed in as " + R.line(w.name) + (w.roles.length ? " (" + w.roles.join(", ") + ")" : "") : "";
      $("sign-out").textContent = "Sign out";
      // The server decides what the inbox holds; this only says so.
      const approver = w && (w.roles.includes("admin") || w.roles.includes("approver"));
      $("inbox-hint").textContent = approver
        ? "Calls waiting for an approver, and calls on your own personal connections. A call on someone else's personal connection is theirs alone to decide and is not shown."
        : "Calls on your own personal connections: only you may decide them. Other calls are decided by approvers.";
    } else {
      $("who").textContent = "admin token";
      $("sign-out").textContent = "Forget token";
    }
    setConn("connecting…");
    pollApprovals();
    const run = runFromHash() || sessionStorage.getItem(RUN_KEY);
    if (run) {
      $("run-id").value = run;
      followRun(run);
    }
  }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("token").value.trim();
    if (!t || config.sign_in !== "token") return;
    sessionStorage.setItem(TOKEN_KEY, t);
    $("token").value = "";
    start();
  });

  $("sign-in").addEventListener("click", () => {
    signIn().catch((err) => signedOut("could not start the sign-in: " + err.message));
  });

  $("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    signedOut();
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

  // inbox reads every page of the caller's inbox (GET /v1/approvals
  // follows MayDecide: a member's own personal calls; an approver's shared
  // ones), following next_cursor to the end so that nothing hides past the
  // first page. A cursor seen before would never end: it is an error.
  async function inbox() {
    const all = [];
    const seen = new Set();
    let path = "v1/approvals?limit=100";
    for (;;) {
      const data = await api("GET", path);
      for (const a of (data && data.approvals) || []) all.push(a);
      const next = data && typeof data.next_cursor === "string" ? data.next_cursor : "";
      if (!next) return all;
      if (seen.has(next)) throw new Error("the control plane's approvals list repeated a page; retrying…");
      seen.add(next);
      path = "v1/approvals?limit=100&cursor=" + encodeURIComponent(next);
    }
  }

  async function pollApprovals() {
    const gen = ++pollGen;
    clearTimeout(pollTimer);
    try {
      const list = await inbox();
      const links = await inputInbox();
      if (gen !== pollGen) return;
      approvals = list;
      inputs = links;
      setConn("connected", "ok");
      renderApprovals();
      renderInputs();
    } catch (err) {
      if (gen !== pollGen) return;
      if (handleError(err)) return;
      if (!(err instanceof APIError)) setConn(R.line(err.message), "bad");
    }
    pollTimer = setTimeout(pollApprovals, POLL_MS);
  }

  function timeLeft(expiresAt) {
    const ms = Date.parse(expiresAt) - Date.now();
    if (!(ms > 0)) return "expired";
    const s = Math.floor(ms / 1000);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    const pad = (n) => String(n).padStart(2, "0");
    return (h ? h + ":" + pad(m) : String(m)) + ":" + pad(sec) + " left";
  }

  function ago(at) {
    const s = Math.max(0, Math.floor((Date.now() - Date.parse(at)) / 1000));
    if (s < 60) return s + " s ago";
    if (s < 3600) return Math.floor(s / 60) + " min ago";
    return Math.floor(s / 3600) + " h ago";
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

  // clipped shows a rendered text cut to the card's size, saying what it
  // hid, with a button that shows the rest.
  function clipped(tag, cls, text) {
    const box = el("div", "clip");
    const c = R.clip(text, CLIP_CHARS, CLIP_LINES);
    const pre = el(tag, cls, c.text);
    box.appendChild(pre);
    const n = R.notice(c);
    if (n) {
      const more = el("p", "hidden-note", n + ".");
      const all = el("button", "show-all", "Show all");
      all.type = "button";
      all.addEventListener("click", () => {
        pre.textContent = text;
        more.remove();
      });
      more.appendChild(document.createTextNode(" "));
      more.appendChild(all);
      box.appendChild(more);
    }
    return box;
  }

  function renderInput(box, a) {
    box.replaceChildren();
    if (a.input === null || a.input === undefined) {
      box.appendChild(el("p", "hint", "The list shows the start of this input (" + a.input_size + " bytes in all); loading it whole…"));
      box.appendChild(clipped("pre", "input", R.block(a.input_preview || "")));
      return;
    }
    const v = R.call(a.tool_name, a.input);
    // The summary line, unless a section already shows exactly it (a
    // command).
    if (!v.sections.some((s) => s.text === v.summary)) box.appendChild(clipped("pre", "summary", v.summary));
    for (const s of v.sections) {
      const sec = el("div", "section " + s.kind);
      sec.appendChild(el("div", "label", s.label));
      sec.appendChild(clipped("pre", "input", s.text));
      box.appendChild(sec);
    }
    if (a.input_truncated) {
      box.appendChild(el("p", "hidden-note", "The input is kept cut for display: " + a.input_size + " bytes in all, digest " + R.line(a.input_digest) + "."));
    }
  }

  function fact(dl, term, text) {
    if (text === undefined || text === null || text === "") return null;
    dl.appendChild(el("dt", "", term));
    const dd = el("dd", "", text);
    dl.appendChild(dd);
    return dd;
  }

  function facts(a) {
    const f = a.review || {};
    const dl = el("dl", "facts");
    fact(dl, "why", f.reason ? R.line(f.reason) : "");
    if (f.rule) {
      fact(dl, "rule", R.line(a.rule_id || "") + " " + R.value(f.rule, null, ""));
    } else {
      fact(dl, "rule", "no rule matched: the policy's default (" + R.line(f.default_verdict || "require_approval") + ")");
    }
    fact(dl, "policy", R.line(f.policy || ""));
    const run = fact(dl, "run", R.line(a.session_id) + " ");
    const link = el("a", "timeline-link", "timeline");
    link.href = "#run=" + encodeURIComponent(a.session_id);
    run.appendChild(link);
    fact(dl, "trigger", R.line(f.trigger || "") + (f.invoker ? " by " + R.line(f.invoker) : ""));
    if (f.repository) {
      fact(dl, "repository", R.line(f.repository) + (f.pull_request ? " #" + f.pull_request : ""));
    }
    if (f.head_repository) {
      fact(dl, "head", R.line(f.head_repository) + (f.fork ? " (a fork)" : "") + (f.head_sha ? " @ " + R.line(f.head_sha).slice(0, 12) : ""));
    }
    fact(dl, "trust tier", R.line(f.trust_tier || "") + (f.autonomous ? ", autonomous" : ""));
    if (a.connection_id) fact(dl, "connection", R.line(a.connection_id));
    const asked = fact(dl, "requested", new Date(a.requested_at).toLocaleString() + " ");
    asked.appendChild(el("span", "ago", ago(a.requested_at)));
    asked.dataset.requestedAt = a.requested_at;
    return dl;
  }

  function approvalCard(a) {
    const li = el("li", "approval");
    li.dataset.approvalId = a.id;
    li.dataset.expiresAt = a.expires_at;
    const head = el("div", "head");
    head.appendChild(el("span", "tool", R.line(a.tool_name)));
    head.appendChild(el("span", "meta", a.rule_id ? "rule " + R.line(a.rule_id) : "policy default"));
    head.appendChild(el("span", "meta id", R.line(a.id)));
    head.appendChild(el("span", "left", timeLeft(a.expires_at)));
    li.appendChild(head);
    const f = a.review || {};
    // What deserves a second look (an opaque line, a destructive command)
    // comes first, and approving is then not the primary action.
    const danger = Array.isArray(f.danger) ? f.danger : [];
    if (danger.length > 0) {
      li.classList.add("dangerous");
      const warn = el("div", "danger");
      warn.setAttribute("role", "alert");
      warn.appendChild(el("strong", "", "Look twice before approving:"));
      const ul = el("ul", "");
      for (const d of danger) ul.appendChild(el("li", "", R.line(String(d))));
      warn.appendChild(ul);
      li.appendChild(warn);
    }
    const input = el("div", "call");
    renderInput(input, a);
    li.appendChild(input);
    if (f.matched && f.matched.text) {
      const m = el("p", "matched", "The rule asked about part " + f.matched.index + " of " + f.matched.of + ": ");
      m.appendChild(el("mark", "", R.line(String(f.matched.text))));
      li.appendChild(m);
    }
    if (a.input === null || a.input === undefined) {
      api("GET", "v1/approvals/" + encodeURIComponent(a.id))
        .then((whole) => renderInput(input, whole))
        .catch((err) => {
          if (!handleError(err)) input.appendChild(el("p", "hidden-note", "could not load the whole input: " + R.line(err.message)));
        });
    }
    li.appendChild(facts(a));

    const sc = R.scope(a.scope_key || "", a.session_id, a.default_scope);
    const actions = el("div", "actions");
    const choice = (cls, label, words, onClick, disabled) => {
      const box = el("div", "choice");
      const b = el("button", cls, label);
      b.type = "button";
      b.disabled = !!disabled;
      b.addEventListener("click", onClick);
      box.appendChild(b);
      box.appendChild(el("p", "scope", words));
      actions.appendChild(box);
    };
    choice("approve-once", "Approve once" + (sc.default === "once" ? " (the rule's default)" : ""), sc.once, () => decide(a, "approved_once", "", li));
    choice("approve-session", "Approve for run" + (sc.default === "run" ? " (the rule's default)" : ""), sc.run + (f.grant_covers ? " Note: " + R.line(f.grant_covers) + "." : ""), () => decide(a, "approved_session", "", li), !sc.run_ok);
    choice("deny", "Deny…", sc.deny, () => {
      form.hidden = false;
      form.querySelector("input").focus();
    });
    li.appendChild(actions);

    const form = el("form", "deny-form");
    form.hidden = true;
    form.autocomplete = "off";
    const reason = el("input", "deny-reason");
    reason.placeholder = "reason, told to the agent (optional)";
    reason.setAttribute("aria-label", "reason for denying");
    reason.maxLength = 500;
    const confirm = el("button", "deny-confirm", "Deny this call");
    confirm.type = "submit";
    const cancel = el("button", "deny-cancel", "Cancel");
    cancel.type = "button";
    cancel.addEventListener("click", () => {
      form.hidden = true;
    });
    form.append(reason, confirm, cancel);
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      decide(a, "denied", reason.value.trim(), li);
    });
    li.appendChild(form);
    return li;
  }

  async function decide(a, decision, reason, li) {
    for (const b of li.querySelectorAll("button")) b.disabled = true;
    try {
      const body = { decision };
      if (reason) body.reason = reason;
      const res = await api("POST", "v1/approvals/" + encodeURIComponent(a.id) + "/decision", body);
      if (res.applied) {
        notice(a.id + " " + res.status + ": applied (" + R.line(a.tool_name) + ")", "ok");
      } else {
        notice(a.id + " was already " + res.status + (res.decided_by ? " by " + R.line(res.decided_by) : ""), "bad");
      }
      li.remove();
      approvals = approvals.filter((x) => x.id !== a.id);
      $("pending-count").textContent = String(approvals.length);
      $("attention-empty").hidden = approvals.length > 0;
    } catch (err) {
      if (handleError(err)) return;
      notice("could not decide " + a.id + ": " + R.line(err.message), "bad");
      for (const b of li.querySelectorAll("button")) b.disabled = false;
      const sc = R.scope(a.scope_key || "", a.session_id, a.default_scope);
      li.querySelector("button.approve-session").disabled = !sc.run_ok;
    }
    pollApprovals();
  }

  // ---- input requests: links an upstream asked a person to open ----
  //
  // The link is the upstream's text. It is shown as escaped text, cut to
  // LINK_CHARS, and offered as a link only when it parses as an absolute
  // http: or https: URL (never javascript:, data: or an app's scheme); the
  // link opens in a new tab with no referrer and no opener. The name shown
  // is the connection's name in fluidbox, never one the upstream gave.

  const LINK_CHARS = 300;
  let inputs = [];

  // inputInbox reads every page of GET /v1/input-requests (the same rule
  // as the approvals inbox: what the caller may answer).
  async function inputInbox() {
    const all = [];
    const seen = new Set();
    let path = "v1/input-requests?limit=100";
    for (;;) {
      const data = await api("GET", path);
      for (const r of (data && data.input_requests) || []) all.push(r);
      const next = data && typeof data.next_cursor === "string" ? data.next_cursor : "";
      if (!next) return all;
      if (seen.has(next)) throw new Error("the control plane's input request list repeated a page; retrying…");
      seen.add(next);
      path = "v1/input-requests?limit=100&cursor=" + encodeURIComponent(next);
    }
  }

  // safeHref is url as a link to click, or "" when it may not be one. The
  // rule is Slack's too (Openable in shared/slackbot), held to one list of
  // cases both are tested against (shared/slackbot/testdata/openable.json):
  // at most 2,048 bytes; no character below "!", no DEL, no backslash;
  // "http://" or "https://" (any case) then a host, with no user info;
  // every "%" starting an escape; a port of at most 65535; and a URL the
  // browser's parser reads. A browser would drop tabs, read a backslash as
  // a slash and "https:host" as a host: such text is never a link.
  function safeHref(url) {
    if (typeof url !== "string" || url === "" || new TextEncoder().encode(url).length > 2048) return "";
    for (let i = 0; i < url.length; i++) {
      const c = url.charCodeAt(i);
      if (c < 0x21 || c === 0x7f || c === 0x5c) return "";
    }
    if (/%(?![0-9A-Fa-f]{2})/.test(url)) return "";
    const m = /^https?:\/\/([^\/?#]*)/i.exec(url);
    if (!m || m[1] === "" || m[1].includes("@")) return "";
    let u;
    try {
      u = new URL(url);
    } catch (_) {
      return "";
    }
    if ((u.protocol !== "https:" && u.protocol !== "http:") || u.username || u.password || u.host === "") return "";
    return u.href;
  }

  function renderInputs() {
    const list = $("inputs");
    const keep = new Map();
    for (const li of Array.from(list.children)) keep.set(li.dataset.inputRequestId, li);
    const ids = new Set(inputs.map((r) => r.id));
    for (const [id, li] of keep) if (!ids.has(id)) li.remove();
    for (const r of inputs) {
      if (keep.has(r.id)) continue;
      list.appendChild(inputCard(r));
    }
    $("inputs-count").textContent = String(inputs.length);
    $("inputs-empty").hidden = inputs.length > 0;
  }

  function inputCard(r) {
    const li = el("li", "approval input-request");
    li.dataset.inputRequestId = r.id;
    li.dataset.expiresAt = r.expires_at;
    const head = el("div", "head");
    head.appendChild(el("span", "tool", R.line(r.tool_name)));
    head.appendChild(el("span", "meta", "connection " + R.line(r.server)));
    head.appendChild(el("span", "meta id", R.line(r.id)));
    head.appendChild(el("span", "left", timeLeft(r.expires_at)));
    li.appendChild(head);
    li.appendChild(el("p", "hint", "The upstream of connection " + R.line(r.server) + " asks a person to open this link and finish there before it runs the call. Open it only if you expect it."));
    const shown = R.clip(R.line(r.url || r.link || ""), LINK_CHARS, 1);
    li.appendChild(el("code", "link-text", shown.text));
    const href = safeHref(r.url || "");
    if (href) {
      const a = el("a", "open-link", "Open the link in a new tab");
      a.href = href;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      a.referrerPolicy = "no-referrer";
      li.appendChild(el("p", "")).appendChild(a);
    } else {
      li.appendChild(el("p", "hidden-note", "This link is not an http or https URL, so it is not offered."));
    }
    const dl = el("dl", "facts");
    fact(dl, "run", R.line(r.session_id));
    fact(dl, "call", R.line(r.tool_call_id));
    li.appendChild(dl);
    const actions = el("div", "actions");
    const choice = (cls, label, words, decision) => {
      const box = el("div", "choice");
      const b = el("button", cls, label);
      b.type = "button";
      b.addEventListener("click", () => answerInput(r, decision, li));
      box.appendChild(b);
      box.appendChild(el("p", "scope", words));
      actions.appendChild(box);
    };
    choice("input-done", "Done", "I opened the link and finished there: the call runs again.", "done");
    choice("input-decline", "Decline", "The call is refused.", "decline");
    li.appendChild(actions);
    return li;
  }

  async function answerInput(r, decision, li) {
    for (const b of li.querySelectorAll("button")) b.disabled = true;
    try {
      const res = await api("POST", "v1/input-requests/" + encodeURIComponent(r.id) + "/decision", { decision });
      if (res.applied) {
        notice(r.id + " " + res.status + ": applied (" + R.line(r.tool_name) + ")", "ok");
      } else {
        notice(r.id + " was already " + res.status + (res.decided_by ? " by " + R.line(res.decided_by) : ""), "bad");
      }
      li.remove();
      inputs = inputs.filter((x) => x.id !== r.id);
      $("inputs-count").textContent = String(inputs.length);
      $("inputs-empty").hidden = inputs.length > 0;
    } catch (err) {
      if (handleError(err)) return;
      notice("could not answer " + r.id + ": " + R.line(err.message), "bad");
      for (const b of li.querySelectorAll("button")) b.disabled = false;
    }
    pollApprovals();
  }

  function tick() {
    for (const li of $("inputs").children) {
      const left = li.querySelector(".left");
      const text = timeLeft(li.dataset.expiresAt);
      left.textContent = text;
      left.classList.toggle("expired", text === "expired");
    }
    for (const li of $("attention").children) {
      const left = li.querySelector(".left");
      const text = timeLeft(li.dataset.expiresAt);
      left.textContent = text;
      left.classList.toggle("expired", text === "expired");
      const asked = li.querySelector("dd[data-requested-at] .ago");
      if (asked) asked.textContent = ago(asked.parentElement.dataset.requestedAt);
    }
  }
  setInterval(tick, 1000);

  // ---- timeline ----

  let runCtl = null;

  function stopRun() {
    if (runCtl) runCtl.abort();
    runCtl = null;
  }

  function runFromHash() {
    const m = /^#run=(.+)$/.exec(location.hash);
    if (!m) return "";
    try {
      return decodeURIComponent(m[1]);
    } catch (_) {
      return "";
    }
  }

  window.addEventListener("hashchange", () => {
    const id = runFromHash();
    if (!id || $("app").hidden) return;
    $("run-id").value = id;
    sessionStorage.setItem(RUN_KEY, id);
    followRun(id);
    $("timeline-panel").scrollIntoView();
  });

  $("run-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = $("run-id").value.trim();
    if (!id) return;
    sessionStorage.setItem(RUN_KEY, id);
    followRun(id);
  });

  function describe(e) {
    const d = e.data || {};
    const L = (s) => (s === undefined || s === null ? s : R.line(String(s)));
    const j = (...parts) => parts.filter((p) => p !== undefined && p !== null && p !== "").join(" ");
    // Where the run's shadow policy would have differed; the ledger carries it only then.
    const shadow = () => {
      if (d.shadow_error) return "[shadow: " + L(d.shadow_error) + "]";
      if (!d.shadow_verdict) return "";
      let v = L(d.shadow_verdict);
      if (d.shadow_rewritten_verdict) v += " rewritten to " + L(d.shadow_rewritten_verdict);
      if (d.shadow_rule_id) v += ", rule " + L(d.shadow_rule_id);
      return "[shadow: " + v + "]";
    };
    switch (e.type) {
      case "session.created":
        return j("policy", L(d.policy_id), "v" + d.policy_version + ",", d.tools, "tools, trust", L(d.trust_tier) + (d.autonomous ? ", autonomous" : "") + ",", d.trigger ? "trigger " + L(d.trigger) : "", d.invoker ? "by " + L(d.invoker) : "", d.shadow_policy_id ? "shadow " + L(d.shadow_policy_id) + " v" + d.shadow_policy_version : "");
      case "tool.requested":
        return j(L(d.tool_call_id), L(d.tool_name));
      case "tool.decision": {
        const why = [L(d.source), d.rule_id && "rule " + L(d.rule_id), d.approval_id && "approval " + L(d.approval_id), d.grant && "grant " + L(d.grant)].filter(Boolean);
        const rw = d.rewritten_verdict ? "[" + L(d.verdict) + " rewritten to " + L(d.rewritten_verdict) + "]" : "";
        return j(L(d.tool_call_id), L(d.tool_name), "→", L(d.decision), rw, why.length ? "(" + why.join(", ") + ")" : "", shadow());
      }
      case "approval.requested":
        return j(L(d.approval_id), L(d.tool_call_id), L(d.tool_name), d.rule_id && "rule " + L(d.rule_id), d.default_scope && "scope " + L(d.default_scope), "expires " + new Date(d.expires_at).toLocaleTimeString(), shadow());
      case "approval.decided":
        return j(L(d.approval_id), L(d.tool_call_id), L(d.status), d.decided_by && "by " + L(d.decided_by));
      case "session.ended":
        return j(d.ended_by && "by " + L(d.ended_by));
      case "grant.revoked":
        return j(L(d.scope_key), d.revoked_by && "by " + L(d.revoked_by));
      case "run.halted":
        return j("halted: the result of", L(d.tool_call_id), "answers a call the gate did not allow (" + L(d.reason) + ")");
      case "tool.unverified":
        return j("recorded: the result of", L(d.tool_call_id), "answers a call the gate did not allow (" + L(d.reason) + ")");
    }
    return R.value(d, null, "");
  }

  function addEvent(e) {
    const mark = e.type === "run.halted" ? "deny" : (e.data && (e.data.decision || e.data.status)) || "";
    const tr = el("tr", ["allow", "deny", "pending", "denied"].includes(mark) ? mark : "");
    tr.dataset.seq = String(e.seq);
    tr.appendChild(el("td", "seq", e.seq));
    tr.appendChild(el("td", "at", new Date(e.at).toLocaleTimeString()));
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
    status.textContent = "following " + R.line(id) + "…";
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
        status.textContent = "following " + R.line(id) + " · last seq " + after;
        backoff = 500;
      } catch (err) {
        if (ctl.signal.aborted || (err && err.name === "AbortError")) return;
        if (handleError(err)) return;
        if (err instanceof APIError && err.status === 403) {
          status.textContent = R.line(id) + ": you may not read this run's timeline; you can still decide its calls above";
          return;
        }
        if (err instanceof APIError && err.status >= 400 && err.status < 500) {
          status.textContent = R.line(id) + ": " + R.line(err.message);
          return;
        }
        status.textContent = "connection lost; resuming after seq " + after + "…";
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10000);
      }
    }
  }

  // ---- boot ----

  async function boot() {
    try {
      const resp = await fetch("config.json", { cache: "no-store", credentials: "omit" });
      config = await resp.json();
    } catch (_) {
      config = { sign_in: "unavailable" };
    }
    if (config.sign_in === "sso") {
      const params = new URLSearchParams(location.search);
      if (params.has("code") || params.has("error")) {
        try {
          await completeSignIn(params);
        } catch (err) {
          sessionStorage.removeItem(TOKEN_KEY);
          signedOut("sign-in failed: " + err.message);
          return;
        }
      }
      const w = who();
      if (!w || w.exp * 1000 <= Date.now()) {
        sessionStorage.removeItem(TOKEN_KEY);
        signedOut();
        return;
      }
      start();
      return;
    }
    if (config.sign_in === "token" && token()) start();
    else signedOut();
  }
  boot();
})();
