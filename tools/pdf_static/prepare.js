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
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));

  // 3. The theme's own print header (title and page contents) gives way to the book's cover.
  document.querySelectorAll('#jb-print-docs-body, .bd-header-article').forEach(e => e.remove());

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

  // 7. Each page of the book starts a new sheet; the table of contents lists them.
  const text = h => {
    const c = h.cloneNode(true);
    c.querySelectorAll('.headerlink').forEach(x => x.remove());
    return c.textContent.trim();
  };
  const entries = [];
  docs.forEach(sec => {
    sec.classList.add('course-pdf-doc');
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

  // 8. Display equations and tables wider than the column shrink to fit it (code wraps, by
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
  return {explorers: explorers.length, notReady, docs: docs.length, scaled, entries};
}
