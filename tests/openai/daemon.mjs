// What the Node client tests share (tests/openai, tests/anthropic): a
// pacelined child process, started with
// --http-listen 127.0.0.1:0, its HTTP port read from the
// "pacelined: http on HOST:PORT" line on stderr. Every wait has a deadline.

import assert from 'node:assert/strict';
import {spawn} from 'node:child_process';
import {createHash} from 'node:crypto';
import fs from 'node:fs';
import {createRequire} from 'node:module';
import path from 'node:path';

// SHA-256 hex digest of `key`, as config.proto's api_key_sha256 wants it.
export function sha256Hex(key) {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

// `promise`, or a rejection naming `what` after `ms` milliseconds.
export function withDeadline(promise, ms, what) {
  let timer;
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(
        () => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}

// Package `name` ('openai', '@anthropic-ai/sdk', or a subpath its exports
// map names, '@langchain/core/messages') as the build's npm ci installed it
// under `modules` (an ES import cannot use NODE_PATH); an error naming the
// CMake `target` that installs it when it is missing.
export function loadPackage(modules, name, target) {
  const pkg = name.split('/').slice(0, name.startsWith('@') ? 2 : 1).join('/');
  if (!modules || !fs.existsSync(path.join(modules, pkg, 'package.json'))) {
    throw new Error(
        `${name} is not installed under '${modules}': the build's npm ci ` +
        `(target ${target}) failed or did not run`);
  }
  return createRequire(path.join(modules, '..', 'require.cjs'))(name);
}

// Asserts `promise` rejects within `ms` with an instance of `cls` whose
// HTTP status is `status`; returns the error.
export async function rejectsWith(promise, cls, status, ms) {
  let error = null;
  try {
    await withDeadline(promise, ms, `${cls.name} request`);
  } catch (e) {
    error = e;
  }
  assert.ok(error instanceof cls,
            `expected ${cls.name}, got ${error?.constructor?.name}: ${error}`);
  assert.equal(error.status, status);
  return error;
}

export class Daemon {
  // Spawns `binary` with `args` (--listen and --http-listen are added).
  constructor(binary, args) {
    const extra = ['--listen', '127.0.0.1:0', '--http-listen', '127.0.0.1:0'];
    if (process.getuid && process.getuid() === 0) extra.push('--allow-root');
    this.proc = spawn(binary, [...args, ...extra],
                      {stdio: ['ignore', 'ignore', 'pipe']});
    this.stderr = '';
    this.waiters = new Set();
    this.proc.stderr.setEncoding('utf8');
    this.proc.stderr.on('data', (text) => {
      this.stderr += text;
      this.notify();
    });
    this.exit = new Promise((resolve) => {
      this.proc.on('exit', (code, signal) => {
        this.exited = {code, signal};
        this.notify();
        resolve(this.exited);
      });
    });
    this.exited = null;
  }

  notify() {
    for (const w of this.waiters) w();
  }

  // Resolves with the first match of `regex` in stderr; rejects once the
  // process exits without it or after `ms`.
  waitForStderr(regex, ms) {
    const found = new Promise((resolve, reject) => {
      const check = () => {
        const m = this.stderr.match(regex);
        if (m) {
          this.waiters.delete(check);
          resolve(m);
        } else if (this.exited) {
          this.waiters.delete(check);
          reject(new Error(`pacelined exited (${JSON.stringify(this.exited)})` +
                           ` before ${regex}:\n${this.stderr}`));
        }
      };
      this.waiters.add(check);
      check();
    });
    return withDeadline(found, ms, `pacelined stderr ${regex}`);
  }

  // Waits for "ready"; sets `port` (HTTP) and `baseURL`.
  async ready(ms = 60000) {
    await this.waitForStderr(/^pacelined: ready$/m, ms);
    const m = this.stderr.match(/^pacelined: http on (\S+):(\d+)$/m);
    if (!m) throw new Error(`no 'http on' line:\n${this.stderr}`);
    this.port = Number(m[2]);
    this.baseURL = `http://127.0.0.1:${this.port}/v1`;
    return this;
  }

  signal(name) {
    if (!this.exited) this.proc.kill(name);
  }

  // The exit status, or a rejection after `ms`.
  waitExit(ms) {
    return withDeadline(this.exit, ms, 'pacelined exit');
  }

  // SIGKILL if still running, then the exit (bounded).
  async kill() {
    this.signal('SIGKILL');
    await this.waitExit(10000).catch(() => {});
  }
}
