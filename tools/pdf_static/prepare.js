async ({title, subtitle, byline, note}) => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  // 1. Everything the page typesets or draws has finished.
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  const explorers = [...document.querySelectorAll('.course-vega-explorer')];
  for (let i = 0; i < 600 && explorers.some(e => e.getAttribute('data-ready') !== 'true'); i++)
    await sleep(100);
  const notReady = explorers.filter(e => e.getAttribute('data-ready') !== 'true').length;

  // 2. Dropdowns open: answers, hidden code cells, worked solutions.
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => { e.classList.remove('toggle-hidden'); });

  // 3. The theme's own print header (title and page contents) gives way to the book's cover.
  document.querySelectorAll('#jb-print-docs-body, .bd-header-article').forEach(e => { e.remove(); });

  // 4. Links to other files of the site lead nowhere from a PDF: keep their text only.
  const here = location.origin + location.pathname;
  document.querySelectorAll('a[href]').forEach(a => {
    const url = new URL(a.href, location.href);
    if (url.origin === location.origin && url.origin + url.pathname !== here) {
      a.removeAttribute('href');
      a.classList.add('course-pdf-unlinked');
    }
  });

  // 5. Explorers: the figure at its default settings, and a line saying what the site adds.
  explorers.forEach(e => {
    const p = document.createElement('p');
    p.className = 'course-pdf-note';
    p.textContent = note;
    e.after(p);
  });

  // 6. Headings by nesting: each page of the book is an h1, its sections h2, ... (the single
  //    page nests every chapter under the landing page's last section): the tagged PDF and
  //    the outline (add_outline) follow them.
  const article = document.querySelector('article.bd-article') || document.body;
  const docs = [...article.querySelectorAll('span[id^="document-"] + section')];
  const top = article.querySelector(':scope > section') || article;
  const roots = [top, ...docs];
  const rename = (el, tag) => {
    if (el.tagName.toLowerCase() === tag) return;
    const n = document.createElement(tag);
    for (const a of el.attributes) n.setAttribute(a.name, a.value);
    while (el.firstChild) n.appendChild(el.firstChild);
    el.replaceWith(n);
  };
  article.querySelectorAll('section > h1, section > h2, section > h3, section > h4, ' +
                           'section > h5, section > h6').forEach(h => {
    let depth = 0, s = h.parentElement;
    while (s && !roots.includes(s)) {
      if (s.tagName === 'SECTION') depth++;
      s = s.parentElement;
    }
    rename(h, 'h' + Math.min(6, depth + 1));
  });

  // 7. Ids unique across the book: every chapter has its "recap", "exercises", ... and the
  //    single page keeps them all, so a link (and the PDF's named destination, and with it the
  //    bookmark) to a later chapter's "recap" would land on the first one. A repeated id gets
  //    its page's id in front, and the links inside that page follow it.
  const seen = new Set();
  const owner = el => el.closest('section.course-pdf-doc') || top;
  docs.forEach(sec => { sec.classList.add('course-pdf-doc'); });
  let renamed = 0;
  article.querySelectorAll('[id]').forEach(el => {
    const id = el.id;
    if (!seen.has(id)) { seen.add(id); return; }
    const doc = owner(el);
    let fresh = (doc.id || 'page') + '--' + id;
    for (let k = 2; seen.has(fresh); k++) fresh = (doc.id || 'page') + '--' + id + '-' + k;
    seen.add(fresh);
    el.id = fresh;
    doc.querySelectorAll('a[href="#' + CSS.escape(id) + '"]').forEach(a => {
      if (owner(a) === doc) a.setAttribute('href', '#' + fresh);
    });
    renamed++;
  });

  // 8. Each page of the book starts a new sheet; the table of contents lists them. A
  //    heading's text for the outline: its math as plain text (course_search.py writes that
  //    reading into each math element's data-course-text; MathJax's own text loses the
  //    symbols it draws, such as the root sign).
  const text = h => {
    const c = h.cloneNode(true);
    c.querySelectorAll('.headerlink').forEach(x => { x.remove(); });
    c.querySelectorAll('[data-course-text]').forEach(m => {
      m.replaceWith(document.createTextNode(m.getAttribute('data-course-text')));
    });
    return c.textContent.replace(/\s+/g, ' ').trim();
  };
  const entries = [];
  docs.forEach(sec => {
    const h = sec.querySelector(':scope > h1');
    if (!h) return;
    const nested = sec.parentElement.closest('section.course-pdf-doc') ? 1 : 0;
    const sections = [...sec.querySelectorAll(':scope > section[id] > h2')]
      .map(h2 => ({id: h2.parentElement.id, text: text(h2)}));
    entries.push({id: sec.id, text: text(h), nested, sections});
  });
  const cover = document.createElement('section');
  cover.className = 'course-pdf-cover';
  cover.innerHTML = '<p class="course-pdf-title"></p><p class="course-pdf-subtitle"></p>' +
                    '<p class="course-pdf-byline"></p>';
  cover.querySelector('.course-pdf-title').textContent = title;
  cover.querySelector('.course-pdf-subtitle').textContent = subtitle;
  cover.querySelector('.course-pdf-byline').textContent = byline;
  const licence = document.querySelector('.course-licence');  // the site's footer line
  if (licence) cover.append(licence.cloneNode(true));
  const toc = document.createElement('nav');
  toc.className = 'course-pdf-toc';
  toc.setAttribute('aria-label', 'Contents');
  toc.innerHTML = '<p class="course-pdf-toc-title">Contents</p><ol></ol>';
  const list = toc.querySelector('ol');
  const first = top.querySelector(':scope > h1');
  entries.unshift({id: top.id, text: first ? text(first) : title, nested: 0,
                   sections: [...top.querySelectorAll(':scope > section[id] > h2')]
                     .map(h2 => ({id: h2.parentElement.id, text: text(h2)}))});
  entries.forEach(e => {
    const li = document.createElement('li');
    if (e.nested) li.className = 'nested';
    const a = document.createElement('a');
    a.href = '#' + e.id;
    a.textContent = e.text.trim();
    const page = document.createElement('span');
    page.className = 'course-pdf-page';
    li.append(a, page);
    list.append(li);
  });
  article.prepend(cover, toc);
  document.documentElement.classList.add('course-pdf');

  // 9. Display equations and tables wider than the column shrink to fit it (code wraps, by
  //    the print stylesheet).
  await sleep(50);
  let scaled = 0;
  article.querySelectorAll('mjx-container[display="true"], table, div.cell_output .text_html')
    .forEach(el => {
      const box = el.parentElement.getBoundingClientRect().width;
      const math = el.querySelector(':scope > mjx-math');  // not the hidden MathML copy
      const wide = math ? math.getBoundingClientRect().width : el.scrollWidth;
      if (box > 0 && wide > box + 1) {
        const size = parseFloat(getComputedStyle(el).fontSize);
        el.style.fontSize = (size * box / wide * 0.98) + 'px';
        scaled++;
      }
    });

  // 10. Lines of code that the column wraps (tests/book/test_pdf.py: a line as wide as the site's
  //     code box fits whole): each source line with the heights its pieces are drawn at.
  await sleep(50);
  const wrapped = [];
  article.querySelectorAll('div.highlight pre').forEach(pre => {
    const lines = [];  // per source line: the set of rounded tops
    let line = 0;
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const parts = n.data.split('\n');
      let offset = 0;
      parts.forEach((part, i) => {
        if (i > 0) line++;
        if (part.length) {
          const r = document.createRange();
          r.setStart(n, offset);
          r.setEnd(n, offset + part.length);
          for (const rect of r.getClientRects()) {
            if (rect.width > 0) {
              lines[line] = lines[line] || new Set();
              lines[line].add(Math.round(rect.top));
            }
          }
        }
        offset += part.length + 1;
      });
    }
    const source = pre.textContent.split('\n');
    lines.forEach((tops, i) => {
      if (tops && tops.size > 1) wrapped.push({length: source[i].length, line: source[i]});
    });
  });
  return {explorers: explorers.length, notReady, docs: docs.length, scaled, renamed, wrapped,
          entries};
}
