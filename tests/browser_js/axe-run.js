async (only) => {
  const options = {resultTypes: ['violations']};
  if (only) options.runOnly = {type: 'rule', values: only};
  const r = await axe.run(document, options);
  return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ') + '  ' + n.html.slice(0, 120))}));
}
