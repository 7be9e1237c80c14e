// The composer's media upload: the chosen file goes to POST /api/v1/media (its type and
// size are checked there); its signed URL fills the Media URL field (and a document's
// name the File name field). Shown to operators and admins only (the page leaves it out for viewers).
"use strict";

(function () {
  const input = document.getElementById("f-media-file");
  if (!input) { return; }
  async function upload() {
    const file = input.files[0];
    if (!file) { return; }
    const fd = new FormData();
    fd.append("file", file);
    const key = "media-" + (window.crypto && crypto.randomUUID ? crypto.randomUUID() : String(Date.now()));
    await gcWhileBusy([input], async function () {
      gcShow("f-media-msg", "Uploading " + file.name + "…", false);
      try {
        const m = await gcApi("POST", "/media", fd, { "Idempotency-Key": key });
        const url = document.getElementById("f-media");
        url.value = m.url;
        // a document's name shows on the phone; a picture, video or sound shows itself
        document.getElementById("f-filename").value = m.kind === "document" ? m.name : "";
        url.dispatchEvent(new Event("input", { bubbles: true }));
        const until = new Date(m.url_expires_at).toLocaleDateString();
        gcShow("f-media-msg", "Uploaded " + m.name + " (" + m.kind + ", " + m.content_type + "); its link works until " + until + ".", false);
      } catch (e) {
        gcShow("f-media-msg", e.message, true);
      } finally {
        input.value = "";
      }
    });
  }
  input.addEventListener("change", upload);
})();
