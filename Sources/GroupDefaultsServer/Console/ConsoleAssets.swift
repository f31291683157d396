// The console's one stylesheet and its few lines of JavaScript, ours, served from `/console/assets/`
// (the Content-Security-Policy allows scripts and styles from this origin only: nothing inline).

enum ConsoleAssets {
    static let stylesheet = """
        :root { --ink: #1d232b; --muted: #667085; --line: #d9dee5; --paper: #ffffff; --back: #f4f6f8;
                --accent: #2456c7; --danger: #b42318; --ok: #1b7f3b; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
        * { box-sizing: border-box; }
        body { margin: 0; color: var(--ink); background: var(--back); font-size: 15px; line-height: 1.45; }
        a { color: var(--accent); text-decoration: underline; text-underline-offset: .15em; } a:hover { text-decoration-thickness: 2px; }
        .bar a { color: #fff; } .bar .brand { text-decoration: none; }
        .bar { display: flex; flex-wrap: wrap; gap: .75rem; align-items: center; padding: .6rem 1.25rem;
               background: var(--ink); color: #fff; }
        .bar .brand { color: #fff; font-weight: 600; margin-right: auto; }
        .bar form { margin: 0; }
        .bar .link { background: none; border: 1px solid #8892a0; color: #fff; padding: .2rem .6rem; }
        main { max-width: 72rem; margin: 0 auto; padding: 1rem 1.25rem 3rem; }
        h1 { font-size: 1.5rem; margin: .5rem 0 1rem; overflow-wrap: anywhere; }
        h2 { font-size: 1.1rem; margin: 0 0 .75rem; } h3 { font-size: 1rem; margin: 1rem 0 .5rem; }
        .trail { color: var(--muted); font-size: .9rem; overflow-wrap: anywhere; }
        .card { background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem; margin: 0 0 1rem; }
        .narrow { max-width: 26rem; }
        .tiles { display: grid; grid-template-columns: repeat(auto-fill, minmax(10rem, 1fr)); gap: .75rem; margin-bottom: 1rem; }
        .tile { background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; color: var(--muted); }
        .figure { display: block; font-size: 1.6rem; font-weight: 600; color: var(--ink); }
        .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(18rem, 1fr)); gap: .75rem; margin-bottom: 1rem; }
        .chart { margin: 0; background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; color: var(--accent); }
        .chart svg { width: 100%; height: 4rem; display: block; }
        .chart figcaption { color: var(--muted); font-size: .85rem; margin-top: .35rem; }
        .scroll { overflow-x: auto; }
        table { width: 100%; border-collapse: collapse; }
        th, td { text-align: left; vertical-align: top; padding: .45rem .6rem; border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
        th { font-size: .8rem; text-transform: uppercase; letter-spacing: .03em; color: var(--muted); font-weight: 600; }
        td pre { margin: 0; font-size: .85rem; white-space: pre-wrap; word-break: break-word; }
        tr.revoked, tr.deleted { color: var(--muted); } tr.deleted pre { text-decoration: line-through; }
        #tail-rows tr { animation: arrive 1.5s ease-out; }
        @keyframes arrive { from { background: #fff6d5; } to { background: transparent; } }
        code { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .85rem; overflow-wrap: anywhere; }
        .muted { color: var(--muted); }
        .error { color: var(--danger); font-weight: 600; }
        .notice { background: #eef4ff; border-color: #b6cbf5; }
        .secret code { font-size: .95rem; background: var(--back); padding: .2rem .4rem; border-radius: 4px; }
        .checks { list-style: none; padding: 0; margin: 0; }
        .checks li { padding: .2rem 0 .2rem 1.1rem; position: relative; }
        .checks li::before { content: ""; position: absolute; left: 0; top: .65rem; width: .55rem; height: .55rem; border-radius: 50%; }
        .checks li.ok::before { background: var(--ok); } .checks li.bad::before { background: var(--danger); }
        form.stack label, #sign-in label { display: block; margin: .5rem 0; }
        form.stack input:not([type=checkbox]), #sign-in input { display: block; width: 100%; max-width: 24rem; margin-top: .2rem; }
        form.inline { display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; margin-bottom: .5rem; }
        input { font: inherit; padding: .35rem .5rem; border: 1px solid var(--line); border-radius: 6px; }
        button { font: inherit; padding: .35rem .8rem; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent);
                 color: #fff; cursor: pointer; }
        button.danger { background: var(--paper); color: var(--danger); border-color: var(--danger); }
        td form { margin: 0; }
        meter { width: 8rem; }
        @media (max-width: 40rem) {
          main { padding: .75rem; } .card { padding: .75rem; } th, td { padding: .35rem .4rem; }
          table { width: max-content; min-width: 100%; } th { white-space: nowrap; }
          td { max-width: 15rem; overflow-wrap: break-word; } td pre { white-space: pre; }
          .bar { padding: .5rem .75rem; } .who { display: none; }
        }
        """

    /// Copies the new token; opens the live tail of a suite page (an `EventSource` on the session's
    /// cookie) and adds each change as a row. Text goes in with `textContent` only, never as HTML.
    static let script = """
        "use strict";
        document.addEventListener("DOMContentLoaded", () => {
          const copy = document.getElementById("copy-token");
          if (copy) {
            copy.addEventListener("click", async () => {
              const text = document.getElementById(copy.dataset.copy).textContent;
              try { await navigator.clipboard.writeText(text); copy.textContent = "Copied"; }
              catch (error) { copy.textContent = "Select and copy it"; }
            });
          }
          const tail = document.getElementById("tail");
          if (!tail || !window.EventSource) return;
          const rows = document.getElementById("tail-rows");
          const status = document.getElementById("tail-status");
          const source = new EventSource(tail.dataset.source);
          source.addEventListener("open", () => { status.textContent = "live"; });
          source.addEventListener("error", () => { status.textContent = "reconnecting…"; });
          source.addEventListener("change", (event) => {
            const change = JSON.parse(event.data);
            const row = document.createElement("tr");
            if (change.deleted) row.className = "deleted";
            row.dataset.key = change.key;
            for (const [name, text] of [["key", change.key], ["value", change.value], ["writer", change.writer],
                                        ["written", change.written], ["rev", String(change.rev)]]) {
              const cell = document.createElement("td");
              cell.className = name;
              if (name === "value") {
                const pre = document.createElement("pre");
                pre.textContent = text;
                cell.appendChild(pre);
              } else {
                cell.textContent = text;
              }
              row.appendChild(cell);
            }
            rows.prepend(row);
            while (rows.children.length > 200) rows.lastElementChild.remove();
          });
          source.addEventListener("end", () => { status.textContent = "ended (signed out?)"; source.close(); });
        });
        """
}
