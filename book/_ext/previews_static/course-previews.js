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

  // A link to a fragment of the site, or to a page of it (a chapter: {doc} links have no
  // fragment), not to the page itself.
  const target = (a) => {
    if (a.closest(".course-preview, .headerlink, nav, .bd-sidebar-primary, .bd-toc")) return null;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin) return null;
    if (url.hash.length >= 2) return url;
    const samePage = url.pathname === location.pathname;
    return !samePage && a.matches("a.reference.internal") && /\.html$/.test(url.pathname) ? url : null;
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

  // A copy of `el` for the box: no ids (the page's own stay unique), no header links or
  // scripts, links and images resolved from the page it came from.
  const copy = (el, url) => {
    const c = el.cloneNode(true);
    const all = [c, ...c.querySelectorAll("*")];
    for (const x of all) {
      if (x !== c && x.matches(".headerlink, script")) { x.remove(); continue; }
      x.removeAttribute("id");
      if (x.hasAttribute("href")) x.setAttribute("href", new URL(x.getAttribute("href"), url).href);
      if (x.hasAttribute("src")) x.setAttribute("src", new URL(x.getAttribute("src"), url).href);
    }
    return c;
  };
  // Items that are only valid inside their list (a glossary's <dt>/<dd> in its <dl>, a
  // bibliography entry in its role="list") go into an empty copy of that parent, so the box
  // stays valid markup for assistive technology (axe: dlitem, aria-required-parent).
  const inParent = (items, parent, url) => {
    const shell = parent.cloneNode(false);
    shell.removeAttribute("id");
    shell.append(...items.map((x) => copy(x, url)));
    return shell;
  };
  // A section's first paragraph of prose, in its first subsection if it has none of its own
  // (a chapter opens with its learning objectives, then "## ..."): not one inside an
  // admonition, a figure, a table, a code cell or its output.
  const firstParagraph = (section) =>
    [...section.querySelectorAll("p")].find(
      (p) => p.textContent.trim() &&
        !p.closest(".admonition, figure, table, .cell, .cell_output, .sd-card, aside, nav, .topic"));

  // What the fragment is: a glossary term (the entry's terms, its synonyms among them, and its
  // definition), a section (heading and first paragraph), a page (its title and first
  // paragraph), or the element itself (a citation, a figure, an equation, a table).
  const content = (doc, id, url) => {
    let el = id ? doc.getElementById(id) : doc.querySelector("article section");
    if (!el) return null;
    // A label is an empty <span id>: before a section, the section is the target; before a
    // section's heading (a label on a chapter's title), the section around it.
    if (!el.textContent.trim() && el.nextElementSibling) el = el.nextElementSibling;
    if (/^H[1-6]$/.test(el.tagName) && el.parentElement.tagName === "SECTION") el = el.parentElement;
    const out = document.createElement("div");
    if (el.tagName === "DT") {
      // Synonyms are <dt>s of one entry: "LoRA" and "low-rank adaptation" share one <dd>.
      let first = el;
      while (first.previousElementSibling && first.previousElementSibling.tagName === "DT")
        first = first.previousElementSibling;
      const items = [];
      let x = first;
      for (; x && x.tagName === "DT"; x = x.nextElementSibling) items.push(x);
      for (; x && x.tagName === "DD"; x = x.nextElementSibling) items.push(x);
      out.append(inParent(items, el.parentElement, url));
    } else if (el.tagName === "SECTION") {
      const h = el.querySelector(":scope > h1, :scope > h2, :scope > h3, :scope > h4");
      const p = firstParagraph(el);
      if (h) out.append(copy(h, url));
      if (p) out.append(copy(p, url));
    } else {
      const item = el.closest("figure, .math, table, div.citation") || el;
      const parent = item.parentElement;
      const listed = parent && (parent.tagName === "DL" || /^(list|doc-bibliography)$/.test(parent.getAttribute("role") || ""));
      out.append(listed ? inParent([item], parent, url) : copy(item, url));
    }
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
    // Inside the page's main landmark, as all content must be (axe: region); placed in page
    // coordinates, less those of the box's positioned ancestor if the theme ever has one.
    (a.closest("main, [role=main]") || document.body).append(box);
    a.setAttribute("aria-describedby", box.id);
    const r = a.getBoundingClientRect();
    const w = box.offsetWidth;
    const left = Math.max(8, Math.min(r.left + scrollX, scrollX + document.documentElement.clientWidth - w - 8));
    const below = r.bottom + 6 + box.offsetHeight < innerHeight;
    const top = (below ? r.bottom + 6 : r.top - 6 - box.offsetHeight) + scrollY;
    const ref = box.offsetParent;
    const positioned = ref && ref !== document.body && getComputedStyle(ref).position !== "static";
    const o = positioned ? ref.getBoundingClientRect() : null;
    const dx = o ? o.left + scrollX + ref.clientLeft - ref.scrollLeft : 0;
    const dy = o ? o.top + scrollY + ref.clientTop - ref.scrollTop : 0;
    box.style.left = `${left - dx}px`;
    box.style.top = `${top - dy}px`;
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
