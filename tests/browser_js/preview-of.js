async (hrefs) => {
  // The hover preview (book/_ext/previews_static/course-previews.js) of a link to each href, as
  // a keyboard reader opens it: a link put into the article, focused, the box read once it is
  // this link's, then Escape. -> [{href, text, words (the text less its math), html,
  // paragraphs}] (text '' if none opened).
  const article = document.querySelector('article');
  const out = [];
  for (const href of hrefs) {
    const a = document.createElement('a');
    a.className = 'reference internal';
    a.href = href;
    a.textContent = 'preview probe';
    article.prepend(a);
    a.focus();
    let box = null;
    for (let i = 0; i < 200; i++) {  // 10 s at most: the target page is fetched once
      box = document.getElementById('course-preview');
      if (box && a.getAttribute('aria-describedby') === 'course-preview') break;
      box = null;
      await new Promise(r => setTimeout(r, 50));
    }
    const words = [];  // its text, without the typeset math
    if (box) {
      const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
      for (let n; (n = walk.nextNode());)
        if (!n.parentElement.closest('mjx-container, .math')) words.push(n.textContent);
    }
    out.push({href, text: box ? box.innerText.replace(/\s+/g, ' ').trim() : '',
              words: words.join(' ').replace(/\s+/g, ' ').trim(),
              html: box ? box.innerHTML.slice(0, 4000) : '',
              paragraphs: box ? [...box.querySelectorAll('p')].map(p => p.textContent.trim()) : []});
    document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
    a.remove();
  }
  return out;
}
