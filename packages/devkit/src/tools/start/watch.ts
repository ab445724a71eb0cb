import { type FSWatcher, watch } from 'node:fs';
import { dirname, join, relative } from 'node:path';

/** What may change the app: sources and JSON, not editors' swap and backup files. */
const SOURCE_FILE = /\.(?:[cm]?ts|[cm]?js|json)$/;

/**
 * npm start's watch mode: watches the folders that hold the app's sources (those the last build
 * bundled, and functions/, where a new function appears), and in the project folder host.json, and
 * calls `onChange` with the files that changed (relative to the project) once no change has come
 * for `settleMs`: an editor's save, or a tool's several writes, is one change. One watch per folder,
 * not recursive: every platform reports a folder's own files, and node_modules is never walked.
 */
export class SourceWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private readonly changed = new Set<string>();
  private sources = new Set<string>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly root: string,
    private readonly onChange: (files: string[]) => void,
    private readonly settleMs = 300,
  ) {}

  /** Watches these sources' folders, functions/ and host.json, and stops watching any other folder. */
  watch(sources: ReadonlySet<string>): void {
    this.sources = new Set(sources);
    const folders = new Set([
      this.root,
      join(this.root, 'functions'),
      ...[...sources].map((file) => dirname(file)),
    ]);
    for (const [folder, watcher] of this.watchers) {
      if (folders.has(folder)) continue;
      watcher.close();
      this.watchers.delete(folder);
    }
    for (const folder of folders) {
      if (this.watchers.has(folder)) continue;
      let watcher: FSWatcher;
      try {
        watcher = watch(folder, { persistent: false }, (_event, name) => this.noted(folder, name));
      } catch {
        continue; // A folder gone since the build: the next build's sources say what to watch.
      }
      watcher.on('error', () => {
        watcher.close();
        this.watchers.delete(folder);
      });
      this.watchers.set(folder, watcher);
    }
  }

  close(): void {
    clearTimeout(this.timer);
    for (const watcher of this.watchers.values()) watcher.close();
    this.watchers.clear();
  }

  private noted(folder: string, name: string | null): void {
    if (name === null) return;
    const file = join(folder, name);
    const relevant =
      folder === this.root ? name === 'host.json' || this.sources.has(file) : SOURCE_FILE.test(name);
    if (!relevant) return;
    this.changed.add(relative(this.root, file));
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const files = [...this.changed].sort();
      this.changed.clear();
      this.onChange(files);
    }, this.settleMs);
  }
}
