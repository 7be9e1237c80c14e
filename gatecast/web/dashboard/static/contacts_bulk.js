// Bulk actions on the contacts list: tick rows (or "all matching this search"), then tag,
// add to a list, opt out or erase (typed confirmation) through /api/v1/contacts/bulk/*.
// A repeat of the same request carries the same Idempotency-Key (a double submit replays).
let gcBulkKey = null;
let gcBulkLast = null;

function gcBulkNewKey() {
  if (window.crypto && crypto.randomUUID) { return "bulk-" + crypto.randomUUID(); }
  return "bulk-" + Date.now() + "-" + Math.random().toString(36).slice(2);
}
function gcBulkIds() {
  return Array.from(document.querySelectorAll(".bulk-row:checked")).map(function (b) { return Number(b.value); });
}
function gcBulkAll() {
  const all = document.getElementById("bulk-all");
  return Boolean(all && all.checked) && document.getElementById("bulk-action").value !== "erase";
}
function gcBulkCount() {
  const form = document.getElementById("bulk-form");
  if (!form) { return; }
  const n = gcBulkIds().length;
  let text;
  if (gcBulkAll()) {
    const total = Number(form.dataset.total).toLocaleString();
    text = "All " + (form.dataset.totalExact === "yes" ? "" : "more than ") + total + " contacts matching this search are selected.";
  } else if (n) {
    text = n + " contact" + (n === 1 ? "" : "s") + " selected.";
  } else {
    text = "No contact selected: tick the rows to act on.";
  }
  document.getElementById("bulk-count").textContent = text;
}
function gcBulkPage(on) {
  document.querySelectorAll(".bulk-row").forEach(function (b) { b.checked = on; });
  gcBulkCount();
}
function gcBulkAction() {
  const action = document.getElementById("bulk-action").value;
  document.getElementById("bulk-tag-label").classList.toggle("hidden", action !== "tag");
  document.getElementById("bulk-list-label").classList.toggle("hidden", action !== "add-to-list");
  document.getElementById("bulk-reason-label").classList.toggle("hidden", action !== "opt-out");
  document.getElementById("bulk-confirm-label").classList.toggle("hidden", action !== "erase");
  const all = document.getElementById("bulk-all-label");
  if (all) { all.classList.toggle("hidden", action === "erase"); }
  gcBulkCount();
}
function gcBulkSelection() {
  const form = document.getElementById("bulk-form");
  if (gcBulkAll()) {
    const d = form.dataset;
    return { search: { q: d.q, list_id: d.listId ? Number(d.listId) : null, tag: d.tag || null,
                       opted_out: d.optedOut === "yes" ? true : (d.optedOut === "no" ? false : null) } };
  }
  const ids = gcBulkIds();
  if (!ids.length) { throw new Error("Tick the contacts to act on first."); }
  return { ids: ids };
}
async function gcBulkApply(ev) {
  ev.preventDefault();
  const btn = document.getElementById("bulk-apply");
  await gcWhileBusy([btn], async function () {
    try {
      const action = document.getElementById("bulk-action").value;
      const body = gcBulkSelection();
      if (action === "tag") { body.tag = document.getElementById("bulk-tag").value.trim(); }
      if (action === "add-to-list") { body.list_name = document.getElementById("bulk-list").value.trim(); }
      if (action === "opt-out") { body.reason = document.getElementById("bulk-reason").value.trim(); }
      if (action === "erase") {
        body.confirm = document.getElementById("bulk-confirm").value.trim();
        if (body.confirm.toLowerCase() !== "erase") {
          throw new Error("Type the word erase to confirm: erasing removes the contacts' numbers everywhere and cannot be undone.");
        }
      }
      if ((action === "tag" && !body.tag) || (action === "add-to-list" && !body.list_name)) {
        throw new Error(action === "tag" ? "Write the tag to give them." : "Write the list to add them to.");
      }
      const asked = action + " " + JSON.stringify(body);
      if (asked !== gcBulkLast) { gcBulkKey = gcBulkNewKey(); gcBulkLast = asked; }
      const done = await gcApi("POST", "/contacts/bulk/" + action, body, { "Idempotency-Key": gcBulkKey });
      let text;
      if (action === "erase") {
        text = done.erased + " contact(s) erased" + (done.missing.length ? "; " + done.missing.length + " were already gone" : "") + ".";
      } else {
        const what = { "tag": "tagged “" + body.tag + "”", "add-to-list": "added to “" + body.list_name + "”", "opt-out": "opted out" }[action];
        text = done.changed + " contact(s) " + what + " (those that already were are not counted).";
      }
      // shown again once the list is read anew (the page reloads to show the change)
      sessionStorage.setItem("gcBulkMsg", text);
      location.reload();
    } catch (e) { gcShow("bulk-msg", e.message, true); }
  });
}
document.addEventListener("DOMContentLoaded", function () {
  const said = sessionStorage.getItem("gcBulkMsg");
  if (said && document.getElementById("bulk-msg")) {
    sessionStorage.removeItem("gcBulkMsg");
    gcShow("bulk-msg", said, false);
  }
});
