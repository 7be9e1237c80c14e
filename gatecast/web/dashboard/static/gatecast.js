// gatecast dashboard helpers: JSON calls to /api/v1 with the session cookie.
"use strict";

// the button whose click is running (only in the click's own turn, before any await)
function gcClickedButton() {
  const ev = window.event;
  if (!ev || (ev.type !== "click" && ev.type !== "dblclick") || !ev.target || !ev.target.closest) { return null; }
  return ev.target.closest("button");
}

// Every change a click starts is safe to click twice: the button stays disabled until
// the answer comes (a double click sends once), and a POST carries the button's
// Idempotency-Key (the same until an answer succeeds, then a fresh one), so a repeat that
// still arrives is answered as the first was instead of creating again.
async function gcApi(method, path, body, headers) {
  const opts = { method: method, headers: Object.assign({ "Accept": "application/json", "X-Gatecast-Dashboard": "1" }, headers || {}), credentials: "same-origin" };
  if (body instanceof FormData) {
    opts.body = body;
  } else if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const button = method !== "GET" ? gcClickedButton() : null;
  const holding = button !== null && !button.disabled;
  if (button && method === "POST" && !opts.headers["Idempotency-Key"]) {
    button.dataset.gcKey = button.dataset.gcKey || gcNewKey("click");
    opts.headers["Idempotency-Key"] = button.dataset.gcKey;
  }
  if (holding) { button.disabled = true; }
  let res;
  try { res = await fetch("/api/v1" + path, opts); }
  finally { if (holding) { button.disabled = false; } }
  if (button && res.ok) { delete button.dataset.gcKey; }
  let data = null;
  const text = await res.text();
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { detail: text }; }
  if (!res.ok) {
    const err = new Error(gcErrorText(res.status, data));
    err.status = res.status;
    err.data = data;
    throw err;
  }
  return data;
}

// a fresh Idempotency-Key for one submission of a form (crypto.getRandomValues works on
// plain http too, where crypto.randomUUID does not)
function gcNewKey(prefix) {
  const bytes = new Uint8Array(18);
  crypto.getRandomValues(bytes);
  return prefix + "-" + Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("");
}

// errors are problem details: {title, status, detail, code, errors: [{loc, msg}]}
// (a 500 or a page that is not JSON never shows as-is: it is said in words)
function gcErrorText(status, data) {
  if (status >= 500 || (data && typeof data.detail === "string" && /^\s*</.test(data.detail))) {
    return status === 502 || status === 503 || status === 504
      ? "The server is not reachable right now (" + status + "). Nothing may have been done: try again in a moment."
      : "The server could not finish this (error " + status + (data && data.reference ? ", reference " + data.reference : "") + "). Reload the page to see whether it was done before trying again.";
  }
  if (data && Array.isArray(data.errors) && data.errors.length) {
    return data.errors.map(function (e) {
      const loc = (e.loc || []).filter(function (p) { return p !== "body" && p !== "query"; }).join(".");
      return (loc ? loc + ": " : "") + e.msg;
    }).join("\n");
  }
  if (data && data.detail) { return String(data.detail); }
  if (data && data.title) { return String(data.title); }
  return "HTTP " + status;
}

// a refusal's field errors ({errors: [{loc, msg}]}) under their fields in ``form``: the
// element [data-error=FIELD] gets the words, the field named FIELD is marked invalid;
// what names no field of the form goes to ``other`` (the whole message if none does)
function gcShowFieldErrors(form, err, other) {
  const errors = (err.data && Array.isArray(err.data.errors)) ? err.data.errors : [];
  const left = [];
  errors.forEach(function (e) {
    const field = (e.loc || []).filter(function (p) { return p !== "body" && p !== "query"; })[0];
    const spot = field ? form.querySelector("[data-error='" + field + "']") : null;
    if (!spot) { left.push(e.msg); return; }
    spot.textContent = (spot.textContent ? spot.textContent + " " : "") + e.msg;
    form.querySelectorAll("[name='" + field + "']").forEach(function (f) { f.setAttribute("aria-invalid", "true"); });
  });
  if (other && (left.length || !errors.length)) { gcShow(other, left.length ? left.join("\n") : err.message, true); }
  const first = form.querySelector("[aria-invalid=true]");
  if (first) { first.focus(); }
}

// clear what gcShowFieldErrors put in ``form``
function gcClearFieldErrors(form) {
  form.querySelectorAll("[data-error]").forEach(function (spot) { spot.textContent = ""; });
  form.querySelectorAll("[aria-invalid]").forEach(function (f) { f.removeAttribute("aria-invalid"); });
}

// run fn() with the buttons disabled (a second click while it runs does nothing)
async function gcWhileBusy(buttons, fn) {
  if (buttons.some(function (b) { return b.disabled; })) { return undefined; }
  buttons.forEach(function (b) { b.disabled = true; });
  try { return await fn(); }
  finally { buttons.forEach(function (b) { b.disabled = false; }); }
}

// the element ``id`` read again from the server (this page as it is now), in place: a
// list shows what was just saved without a reload; the page is reloaded if that fails
async function gcReloadPart(id) {
  const res = await fetch(window.location.pathname + window.location.search, { credentials: "same-origin" });
  const fresh = res.ok ? new DOMParser().parseFromString(await res.text(), "text/html").getElementById(id) : null;
  if (!fresh) { window.location.reload(); return; }
  document.getElementById(id).replaceWith(fresh);
}

function gcShow(el, text, isError) {
  if (typeof el === "string") { el = document.getElementById(el); }
  if (!el) { return; }
  el.textContent = text;
  el.className = isError ? "error" : "ok";
}

function gcEsc(s) {
  return String(s === null || s === undefined ? "" : s)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

// A <details data-menu> is a menu: Escape closes it and goes back to its summary, and a
// click outside it closes it too.
document.addEventListener("keydown", function (ev) {
  if (ev.key !== "Escape" || !ev.target.closest) { return; }
  const menu = ev.target.closest("details[data-menu][open]");
  if (!menu) { return; }
  menu.open = false;
  menu.querySelector("summary").focus();
  ev.preventDefault();
});
document.addEventListener("click", function (ev) {
  document.querySelectorAll("details[data-menu][open]").forEach(function (menu) {
    if (!menu.contains(ev.target)) { menu.open = false; }
  });
});
