/* Hover previews of glossary terms, citations and cross-references (course_previews.py).
 * The target page is fetched from the site itself (same origin, so offline too) and the
 * fragment the link names is shown in a box beside the link. */
(() => {
  "use strict";
  const pages = new Map();  // page URL -> Promise<Document>
  let box = null;
  let owner = null;
  let timer = null;  // the preview's opening, after the pointer rests
  let closing = null;  // its closing, unless the pointer comes back

  const target = (a) => {
    if (a.closest(".course-preview, .headerlink, nav, .bd-sidebar-primary, .bd-toc")) return null;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || url.hash.length < 2) return null;
    return url;
  };

  const fetchPage = (url) => {
    const key = url.origin + url.pathname;
    if (key === location.origin + location.pathname) return Promise.resolve(document);
    if (!pages.has(key)) {
      pages.set(key, fetch(key)
        .then((r) => (r.ok ? r.text() : Promise.reject(new Error(String(r.status)))))
        .then((text) => new DOMParser().parseFromString(text, "text/html")));
    }
    return pages.get(key);
  };

  // What the fragment is: a glossary term (dt + its dd), a section (heading + first
  // paragraph), or the element itself (a citation, a figure, an equation, a table).
  const content = (doc, id, url) => {
    let el = doc.getElementById(id);
    if (!el) return null;
    // A label before a section is an empty <span id> next to it: the section is the target.
    if (!el.textContent.trim() && el.nextElementSibling) el = el.nextElementSibling;
    const out = document.createElement("div");
    if (el.tagName === "DT") {
      out.append(el.cloneNode(true));
      for (let dd = el.nextElementSibling; dd && dd.tagName === "DD"; dd = dd.nextElementSibling)
        out.append(dd.cloneNode(true));
    } else if (el.tagName === "SECTION") {
      const h = el.querySelector(":scope > h1, :scope > h2, :scope > h3, :scope > h4");
      const p = el.querySelector(":scope > p");
      if (h) out.append(h.cloneNode(true));
      if (p) out.append(p.cloneNode(true));
    } else {
      out.append((el.closest("figure, .math, table, div.citation") || el).cloneNode(true));
    }
    out.querySelectorAll(".headerlink, script, [id]").forEach((x) => {
      if (x.matches(".headerlink, script")) x.remove();
      else x.removeAttribute("id");  // the page's own ids stay unique
    });
    // Links and images of the copy resolve from the page it came from.
    out.querySelectorAll("[href]").forEach((x) => x.setAttribute("href", new URL(x.getAttribute("href"), url).href));
    out.querySelectorAll("[src]").forEach((x) => x.setAttribute("src", new URL(x.getAttribute("src"), url).href));
    return out.childNodes.length ? out : null;
  };

  const hide = () => {
    clearTimeout(timer);
    clearTimeout(closing);
    if (owner) owner.removeAttribute("aria-describedby");
    if (box) box.remove();
    box = owner = null;
  };

  const show = async (a, url) => {
    let doc;
    try {
      doc = await fetchPage(url);
    } catch (e) {
      return;  // the page did not load: no preview, the link still works
    }
    if (owner !== a) return;  // the pointer moved on meanwhile
    const inner = content(doc, decodeURIComponent(url.hash.slice(1)), url);
    if (!inner) return;
    if (box) box.remove();
    box = document.createElement("div");
    box.className = "course-preview";
    box.id = "course-preview";
    box.setAttribute("role", "tooltip");
    box.append(...inner.childNodes);
    box.addEventListener("mouseenter", () => clearTimeout(closing));
    box.addEventListener("mouseleave", () => { closing = setTimeout(hide, 200); });
    document.body.append(box);
    a.setAttribute("aria-describedby", box.id);
    const r = a.getBoundingClientRect();
    const w = box.offsetWidth;
    const left = Math.max(8, Math.min(r.left + scrollX, scrollX + document.documentElement.clientWidth - w - 8));
    const below = r.bottom + 6 + box.offsetHeight < innerHeight;
    box.style.left = `${left}px`;
    box.style.top = `${(below ? r.bottom + 6 : r.top - 6 - box.offsetHeight) + scrollY}px`;
    if (window.MathJax && MathJax.typesetPromise) MathJax.typesetPromise([box]).catch(() => {});
  };

  const enter = (e) => {
    const a = e.target.closest && e.target.closest("article a[href]");
    if (a && a === owner) { clearTimeout(closing); return; }
    if (!a) return;
    const url = target(a);
    if (!url) return;
    hide();
    owner = a;
    timer = setTimeout(() => show(a, url), e.type === "focusin" ? 0 : 250);
  };
  const leave = (e) => {
    const a = e.target.closest && e.target.closest("article a[href]");
    if (a && a === owner) { clearTimeout(closing); closing = setTimeout(hide, 200); }
  };
  document.addEventListener("mouseover", enter);
  document.addEventListener("focusin", enter);
  document.addEventListener("mouseout", leave);
  document.addEventListener("focusout", leave);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") hide(); });
})();
