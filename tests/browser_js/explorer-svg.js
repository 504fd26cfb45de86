(id) => document.getElementById(id).querySelector('.course-vega-chart svg').outerHTML
