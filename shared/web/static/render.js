// fluidbox render.js: how the approvals page shows a tool call to the
// human deciding it. A line-for-line mirror of the Go package
// shared/render (which the CLI and Slack use); the browser test renders
// shared/render/testdata/corpus.json with both and compares.
//
// Every control, format (bidi, zero-width, tags), separator and
// non-ASCII space character is shown as an escape; a backslash as \\; a
// run of more than eight spaces with its length; clipping says what it
// hid. Output is plain text for textContent, never markup.
"use strict";

(function () {
  const SPACE_RUN = 8;

  // Characters outside Cf that render as nothing (render.invisible).
  const INVISIBLE = [
    [0x034f, 0x034f], [0x115f, 0x1160], [0x17b4, 0x17b5], [0x180b, 0x180f],
    [0x2800, 0x2800], [0x3164, 0x3164], [0xfe00, 0xfe0f], [0xffa0, 0xffa0],
    [0xe0100, 0xe01ef],
  ];
  const HIDDEN_CLASS = /^[\p{Cf}\p{Zl}\p{Zp}\p{Co}]$/u;
  const SPACE_CLASS = /^\p{Zs}$/u;

  const hex = (n, w) => n.toString(16).toUpperCase().padStart(w, "0");

  // codePoints splits s as Go ranges over a string: by code point, a lone
  // surrogate (which Go's JSON decoder turns into U+FFFD) as U+FFFD.
  function codePoints(s) {
    const out = [];
    for (const ch of s) {
      const c = ch.codePointAt(0);
      out.push(c >= 0xd800 && c <= 0xdfff ? 0xfffd : c);
    }
    return out;
  }

  function hidden(c) {
    if (c === 0xfffd) return false;
    const ch = String.fromCodePoint(c);
    if (HIDDEN_CLASS.test(ch)) return true;
    if (c !== 0x20 && SPACE_CLASS.test(ch)) return true;
    return INVISIBLE.some(([lo, hi]) => c >= lo && c <= hi);
  }

  // rune is how one character is shown (render.Rune).
  function rune(c) {
    switch (c) {
      case 0x5c: return "\\\\";
      case 0x0a: return "\\n";
      case 0x09: return "\\t";
      case 0x0d: return "\\r";
    }
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return "\\x" + hex(c, 2);
    if (hidden(c)) return "\\u{" + hex(c, 4) + "}";
    return String.fromCodePoint(c);
  }

  function escape(s, lines) {
    const rs = codePoints(s);
    let b = "";
    for (let i = 0; i < rs.length; i++) {
      const r = rs[i];
      if (r === 0x20) {
        let j = i;
        while (j < rs.length && rs[j] === 0x20) j++;
        const n = j - i;
        b += n > SPACE_RUN ? "\\u{20}×" + n : " ".repeat(n);
        i = j - 1;
      } else if (r === 0x0a && lines) {
        let j = i;
        while (j < rs.length && rs[j] === 0x0a) j++;
        const n = j - i;
        b += n > 3 ? "\n[" + n + " line breaks]\n" : "\n".repeat(n);
        i = j - 1;
      } else {
        b += rune(r);
      }
    }
    return b;
  }

  // line escapes s for one line; block keeps line breaks (render.Line,
  // render.Block).
  const line = (s) => escape(s, false);
  const block = (s) => escape(s, true);

  const count = (s) => codePoints(s).length;

  // tokens splits a rendering into what must not be split (render.tokens).
  function tokens(s) {
    const out = [];
    let i = 0;
    while (i < s.length) {
      let n;
      if (s[i] === "\\" && i + 1 < s.length) {
        if (s[i + 1] === "x") {
          n = Math.min(4, s.length - i);
        } else if (s[i + 1] === "u") {
          const j = s.indexOf("}", i);
          if (j > i) {
            n = j - i + 1;
            if (s.startsWith("×", i + n)) {
              let k = 1;
              while (i + n + k < s.length && s[i + n + k] >= "0" && s[i + n + k] <= "9") k++;
              n += k;
            }
          } else {
            n = 1;
          }
        } else {
          n = 2;
        }
      } else {
        n = s.codePointAt(i) > 0xffff ? 2 : 1;
      }
      out.push(s.slice(i, i + n));
      i += n;
    }
    return out;
  }

  // clip cuts a rendering to maxChars characters and maxLines lines, never
  // inside an escape (render.Clip).
  function clip(rendered, maxChars, maxLines) {
    const toks = tokens(rendered);
    const c = { text: "", hidden_chars: 0, hidden_lines: 0, total_chars: 0 };
    for (const t of toks) c.total_chars += count(t);
    let width = 0, breaks = 0, i = 0;
    for (; i < toks.length; i++) {
      const n = count(toks[i]);
      const nl = toks[i] === "\n" ? 1 : 0;
      if (width + n > maxChars || breaks + nl >= maxLines) break;
      c.text += toks[i];
      width += n;
      breaks += nl;
    }
    c.hidden_chars = c.total_chars - width;
    for (const t of toks.slice(i)) if (t === "\n") c.hidden_lines++;
    return c;
  }

  // notice says what a clip hid, "" when nothing (Clipped.Notice).
  function notice(c) {
    if (!(c.hidden_chars > 0)) return "";
    let s = c.hidden_chars + " more characters hidden";
    if (c.hidden_lines > 0) s += " (" + c.hidden_lines + " more lines)";
    return s + ", " + c.total_chars + " in all";
  }

  // parse reads JSON keeping each number's source text (Go's UseNumber),
  // so 1.0 and 12345678901234567890 show as written.
  const numberSource = new WeakMap();
  function reviver(key, value, context) {
    if (typeof value === "number" && context && typeof context.source === "string") {
      let m = numberSource.get(this);
      if (!m) numberSource.set(this, (m = new Map()));
      m.set(key, context.source);
    }
    return value;
  }
  const parse = (text) => JSON.parse(text, reviver);

  function numberText(holder, key, n) {
    const m = holder && numberSource.get(holder);
    return (m && m.get(key)) || String(n);
  }

  // byCodePoint orders strings as Go's slices.Sort does (by UTF-8 bytes,
  // which is by code point).
  function byCodePoint(a, b) {
    const x = codePoints(a), y = codePoints(b);
    for (let i = 0; i < x.length && i < y.length; i++) if (x[i] !== y[i]) return x[i] - y[i];
    return x.length - y.length;
  }

  const quote = (s) => '"' + line(s).split('"').join('\\"') + '"';

  // value renders a JSON value on one line (render.Value).
  function value(v, holder, key) {
    if (v === null) return "null";
    switch (typeof v) {
      case "boolean": return String(v);
      case "number": return line(numberText(holder, key, v));
      case "string": return quote(v);
    }
    if (Array.isArray(v)) return "[" + v.map((e, i) => value(e, v, String(i))).join(",") + "]";
    const keys = Object.keys(v).sort(byCodePoint);
    return "{" + keys.map((k) => quote(k) + ":" + value(v[k], v, k)).join(",") + "}";
  }

  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

  function size(content) {
    let n = content.split("\n").length - 1;
    if (content !== "" && !content.endsWith("\n")) n++;
    return n + " lines, " + new TextEncoder().encode(content).length + " bytes";
  }

  function splitLines(s) {
    return s === "" ? [] : s.split("\n");
  }

  // diff shows the change from old to new as lines (render.Diff).
  function diff(oldS, newS) {
    const a = splitLines(oldS), b = splitLines(newS);
    let pre = 0;
    while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
    let suf = 0;
    while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
    const out = [];
    for (const l of a.slice(0, pre)) out.push("  " + line(l));
    for (const l of a.slice(pre, a.length - suf)) out.push("- " + line(l));
    for (const l of b.slice(pre, b.length - suf)) out.push("+ " + line(l));
    for (const l of a.slice(a.length - suf)) out.push("  " + line(l));
    return [out.join("\n"), a.length - pre - suf, b.length - pre - suf];
  }

  // call renders a tool call's input, already parsed (by parse, to keep
  // numbers as written) (render.Call).
  function call(tool, input) {
    if (!isObject(input)) return callText(JSON.stringify(input));
    // As Go's json.Unmarshal into a string: a string, or null as "".
    const asString = (x) => (typeof x === "string" ? x : x === null ? "" : undefined);
    const str = (k) => (Object.prototype.hasOwnProperty.call(input, k) ? asString(input[k]) : undefined);
    const v = { summary: "", sections: [] };
    const used = new Set();
    if (tool === "Bash") {
      const cmd = str("command");
      if (cmd !== undefined) {
        used.add("command");
        v.summary = line(cmd);
        v.sections.push({ label: "command", kind: "block", text: block(cmd) });
      }
    } else if (tool === "Write") {
      const path = str("file_path"), content = str("content");
      if (path !== undefined && content !== undefined) {
        used.add("file_path").add("content");
        v.summary = "write " + line(path) + " (" + size(content) + ")";
        v.sections.push({ label: "file_path", kind: "line", text: line(path) },
          { label: "file (" + size(content) + ")", kind: "file", text: block(content) });
      }
    } else if (tool === "Edit") {
      const path = str("file_path"), oldS = str("old_string"), newS = str("new_string");
      if (path !== undefined && oldS !== undefined && newS !== undefined) {
        used.add("file_path").add("old_string").add("new_string");
        const [d, minus, plus] = diff(oldS, newS);
        v.summary = "edit " + line(path) + " (-" + minus + " +" + plus + " lines)";
        v.sections.push({ label: "file_path", kind: "line", text: line(path) },
          { label: "diff", kind: "diff", text: d });
      }
    }
    const keys = Object.keys(input).filter((k) => !used.has(k)).sort(byCodePoint);
    for (const k of keys) {
      const x = input[k];
      if (asString(x) !== undefined) v.sections.push({ label: line(k), kind: "block", text: block(asString(x)) });
      else v.sections.push({ label: line(k), kind: "line", text: value(x, input, k) });
    }
    if (v.summary === "") v.summary = value(input, { "": input }, "");
    return v;
  }

  // callText renders a call from its input's text: JSON or not.
  function callText(tool, text) {
    if (text === undefined) {
      text = tool;
      tool = "";
    }
    let input;
    try {
      input = parse(text);
    } catch (_) {
      input = undefined;
    }
    if (!isObject(input)) {
      return { summary: line(text), sections: [{ label: "input (not a JSON object)", kind: "block", text: block(text) }] };
    }
    return call(tool, input);
  }

  // scope says in words what each decision on a call allows (render.Scope).
  function scope(scopeKey, runID, defaultScope) {
    const s = {
      once: "allows this one call only; the next one asks again",
      run: "",
      deny: "refuses this call; the agent is told it was denied, with your reason",
      run_ok: false,
      default: defaultScope === "session" ? "run" : "once",
    };
    const run = line(runID);
    if (scopeKey === "") {
      s.run = "not available: no scope a grant could cover was parsed from this call";
    } else if (scopeKey.startsWith("Bash:")) {
      s.run_ok = true;
      s.run = "allows every `" + line(scopeKey.slice(5)) + " ...` command for the rest of this run (" + run + ")";
    } else {
      s.run_ok = true;
      s.run = "allows every " + line(scopeKey) + " call for the rest of this run (" + run + ")";
    }
    return s;
  }

  window.fluidboxRender = Object.freeze({ line, block, clip, notice, parse, value, call, callText, scope });
})();
