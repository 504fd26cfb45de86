async () => {
  if (!document.querySelector('.math')) return 'no math';
  for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 100));
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return 'MathJax never started';
  await MathJax.startup.promise;
  return 'typeset';
}
