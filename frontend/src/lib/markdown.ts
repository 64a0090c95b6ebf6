// Markdown for chat answers and memory files: marked, sanitized by DOMPurify,
// code highlighted by highlight.js, with a copy button added by the page.
import DOMPurify from 'dompurify';
import hljs from 'highlight.js/lib/common';
import { Marked } from 'marked';

const marked = new Marked({
	gfm: true,
	breaks: false,
	renderer: {
		code({ text, lang }) {
			const language = lang && hljs.getLanguage(lang) ? lang : undefined;
			const html = language
				? hljs.highlight(text, { language }).value
				: hljs.highlightAuto(text).value;
			return `<pre data-code><code class="hljs">${html}</code></pre>`;
		}
	}
});

export function renderMarkdown(text: string): string {
	const html = marked.parse(text, { async: false }) as string;
	return DOMPurify.sanitize(html);
}

/** Adds a "copy" button to every code block inside `node`. */
export function copyButtons(node: HTMLElement) {
	const add = () => {
		for (const pre of node.querySelectorAll<HTMLPreElement>('pre[data-code]')) {
			if (pre.querySelector('button')) continue;
			pre.classList.add('relative');
			const button = document.createElement('button');
			button.textContent = 'Copy';
			button.className =
				'absolute right-2 top-2 rounded bg-zinc-700 px-2 py-0.5 text-xs text-zinc-100 hover:bg-zinc-600';
			button.onclick = async () => {
				await navigator.clipboard?.writeText(pre.querySelector('code')?.textContent ?? '');
				button.textContent = 'Copied';
				setTimeout(() => (button.textContent = 'Copy'), 1500);
			};
			pre.appendChild(button);
		}
	};
	add();
	const observer = new MutationObserver(add);
	observer.observe(node, { childList: true, subtree: true });
	return { destroy: () => observer.disconnect() };
}
