// markdown.js: the replies' Markdown as DOM nodes, written here (no library). Every piece of text
// goes in as a text node, never as HTML, so a reply cannot inject markup or script. What it knows:
// headings, paragraphs, **bold**, *italic* / _italic_, `code`, fenced code blocks (```lang, with a
// Copy button), bullet and numbered lists (nested by indentation), > quotes, --- rules, links to
// http(s) and mailto only, and | tables |. An unclosed fence (a reply still streaming) is shown as
// code so far. renderMarkdown(text) returns a DocumentFragment.
'use strict';

(function () {
  function node(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // Inline spans: code first (its content is literal), then links, bold, italic.
  function inline(text, parent) {
    const re = /(`+)([\s\S]*?[^`])\1(?!`)|\[([^\]]+)\]\(([^)\s]+)\)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|\b_([^_\s][^_]*)_\b/;
    let rest = text;
    while (rest) {
      const m = re.exec(rest);
      if (!m) { parent.append(rest); break; }
      if (m.index) parent.append(rest.slice(0, m.index));
      if (m[1]) parent.append(node('code', null, m[2]));
      else if (m[3] !== undefined) {
        const url = m[4];
        if (/^(https?:|mailto:)/i.test(url)) {
          const a = node('a');
          a.href = url;
          a.rel = 'noopener noreferrer';
          a.target = '_blank';
          inline(m[3], a);
          parent.append(a);
        } else {
          parent.append(m[0]);
        }
      } else if (m[5] !== undefined || m[6] !== undefined) {
        const b = node('strong');
        inline(m[5] ?? m[6], b);
        parent.append(b);
      } else {
        const i = node('em');
        inline(m[7] ?? m[8], i);
        parent.append(i);
      }
      rest = rest.slice(m.index + m[0].length);
    }
  }

  function codeBlock(lang, code) {
    const pre = node('pre', 'code-block');
    const bar = node('div', 'code-bar');
    bar.append(node('span', 'code-lang', lang || 'text'));
    const copy = node('button', 'copy', 'Copy');
    copy.type = 'button';
    copy.addEventListener('click', () => {
      navigator.clipboard?.writeText(code).then(() => { copy.textContent = 'Copied'; }, () => {});
    });
    bar.append(copy);
    const c = node('code', lang ? 'lang-' + lang.replace(/[^\w-]/g, '') : null, code);
    pre.append(bar, c);
    return pre;
  }

  function tableRow(line) {
    return line.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());
  }

  // Lists: items at an indentation; deeper lines belong to the item above.
  function list(lines, i, out) {
    const first = /^(\s*)([-*+]|\d+[.)])\s+/.exec(lines[i]);
    const indent = first[1].length;
    const ordered = /\d/.test(first[2]);
    const el = node(ordered ? 'ol' : 'ul');
    while (i < lines.length) {
      const m = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/.exec(lines[i]);
      if (!m || m[1].length < indent) break;
      if (m[1].length > indent) { i = list(lines, i, el.lastElementChild ?? el); continue; }
      if (/\d/.test(m[2]) !== ordered) break;
      const li = node('li');
      inline(m[3], li);
      el.append(li);
      i++;
      while (i < lines.length && lines[i].trim() && !/^\s*([-*+]|\d+[.)])\s+/.test(lines[i]) && /^\s+/.test(lines[i])) {
        li.append(' ');
        inline(lines[i].trim(), li);
        i++;
      }
    }
    out.append(el);
    return i;
  }

  function blocks(text, out) {
    const lines = text.replace(/\r\n?/g, '\n').split('\n');
    let i = 0, para = [];
    const flush = () => {
      if (!para.length) return;
      const p = node('p');
      para.forEach((l, k) => { if (k) p.append(node('br')); inline(l, p); });
      out.append(p);
      para = [];
    };
    while (i < lines.length) {
      const line = lines[i];
      const fence = /^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$/.exec(line);
      if (fence) {
        flush();
        const code = [];
        i++;
        while (i < lines.length && !lines[i].trim().startsWith(fence[1])) code.push(lines[i++]);
        i++; // the closing fence (or the end, while streaming)
        out.append(codeBlock(fence[2], code.join('\n')));
        continue;
      }
      const h = /^(#{1,6})\s+(.*)$/.exec(line);
      if (h) { flush(); const e = node('h' + Math.min(6, h[1].length + 2)); inline(h[2], e); out.append(e); i++; continue; }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { flush(); out.append(node('hr')); i++; continue; }
      if (/^\s*>/.test(line)) {
        flush();
        const q = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) q.push(lines[i++].replace(/^\s*>\s?/, ''));
        const bq = node('blockquote');
        blocks(q.join('\n'), bq);
        out.append(bq);
        continue;
      }
      if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) { flush(); i = list(lines, i, out); continue; }
      if (/^\s*\|.*\|\s*$/.test(line) && i + 1 < lines.length && /^\s*\|?\s*:?-{3,}/.test(lines[i + 1])) {
        flush();
        const table = node('table');
        const head = node('tr');
        for (const c of tableRow(line)) { const th = node('th'); inline(c, th); head.append(th); }
        table.append(head);
        i += 2;
        while (i < lines.length && /^\s*\|.*\|\s*$/.test(lines[i])) {
          const tr = node('tr');
          for (const c of tableRow(lines[i++])) { const td = node('td'); inline(c, td); tr.append(td); }
          table.append(tr);
        }
        out.append(table);
        continue;
      }
      if (!line.trim()) { flush(); i++; continue; }
      para.push(line);
      i++;
    }
    flush();
  }

  window.renderMarkdown = function renderMarkdown(text) {
    const f = document.createDocumentFragment();
    blocks(text, f);
    return f;
  };
})();
