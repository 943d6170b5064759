// The Live page's view: HTML drawn by Python (blockviz.render.live), shown without an iframe. Each
// update replaces the view, keeping what the user opened (a chain, the notes) open and making only
// the rows that were not there before flash.
const KEYED = '[data-key]';
export default function live(component) {
  const { parentElement } = component;
  const html = typeof component.data === 'string' ? component.data : '';
  let root = parentElement.querySelector('.bvl-root');
  if (!root) {
    root = document.createElement('div');
    root.className = 'bvl-root';
    parentElement.appendChild(root);
  }
  if (root.__html === html) return;
  const open = new Set();
  const before = new Set();
  for (const e of root.querySelectorAll(KEYED)) {
    before.add(e.dataset.key);
    if (e.tagName === 'DETAILS' && e.open) open.add(e.dataset.key);
  }
  const first = root.__html === undefined;
  root.innerHTML = html;
  root.__html = html;
  for (const e of root.querySelectorAll(KEYED)) {
    if (e.tagName === 'DETAILS' && open.has(e.dataset.key)) e.open = true;
    if (!first && !before.has(e.dataset.key) && e.classList.contains('bvl-node')) e.classList.add('bvl-flash');
  }
}
