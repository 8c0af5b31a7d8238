// Finding and compare pages: copy the Markdown shown (finding with permalink, or diff).
"use strict";
(function () {
  const button = document.getElementById("copy-markdown");
  const source = document.getElementById("finding-markdown");
  const status = document.getElementById("copy-status");
  if (!button || !source) return;

  function fallbackCopy(text) {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "offscreen";
    document.body.appendChild(area);
    area.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }

  button.addEventListener("click", () => {
    const text = source.textContent;
    const done = (ok) => {
      status.textContent = ok ? "Copied." : "Copy failed: select the text below.";
      button.dataset.copied = ok ? "yes" : "no";
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(() => done(true), () => done(fallbackCopy(text)));
    } else {
      done(fallbackCopy(text));
    }
  });
})();
