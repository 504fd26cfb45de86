() => ({
  hrefs: [...document.querySelectorAll('a[href]')].map(a => a.href),
  unresolved_xrefs: [...document.querySelectorAll('.xref')].filter(e => !e.closest('a'))
                      .map(e => e.textContent.trim()),
})
