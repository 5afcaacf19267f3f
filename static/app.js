// hookdedup console: small enhancements. Every page works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Ask before a form that changes state is sent.
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (ev) => {
      const action = ev.submitter && ev.submitter.value === "reprocess" ? "Reprocess" : null;
      const n = form.querySelectorAll('input[name="k"][type="checkbox"]:checked').length;
      let msg = form.dataset.confirm;
      if (form.id === "bulk") {
        if (n === 0) {
          ev.preventDefault();
          alert("Select at least one key first.");
          return;
        }
        msg = (action ? "Release and reprocess " : "Release ") + n + (n === 1 ? " key?" : " keys?");
      } else if (action) {
        msg = "Release this key and send its event downstream again?";
      }
      if (!confirm(msg)) ev.preventDefault();
    });
  }
  // A header checkbox selects every row's.
  for (const all of document.querySelectorAll("input[data-select-all]")) {
    const boxes = () => all.closest("table").querySelectorAll('tbody input[type="checkbox"][name="' + all.dataset.selectAll + '"]');
    all.addEventListener("change", () => { for (const b of boxes()) b.checked = all.checked; });
    all.closest("table").addEventListener("change", (ev) => {
      if (ev.target === all) return;
      const bs = [...boxes()];
      all.checked = bs.length > 0 && bs.every((b) => b.checked);
      all.indeterminate = !all.checked && bs.some((b) => b.checked);
    });
  }
  // A select marked data-autosubmit applies at once.
  for (const sel of document.querySelectorAll("select[data-autosubmit]")) {
    sel.addEventListener("change", () => sel.form.submit());
  }
});
