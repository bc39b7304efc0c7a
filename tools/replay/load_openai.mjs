// Loads the official `openai` npm package (v4), and the test's other packages (ajv), from where
// tools/replay/ensure_openai.sh put them. ESM imports ignore NODE_PATH, so this looks, in order, in:
// $DS41_OPENAI_MODULES, each NODE_PATH entry, <repo>/build/npm/node_modules, and finally the normal
// resolution from this file.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');

export function loadPackage(name) {
  const dirs = [];
  if (process.env.DS41_OPENAI_MODULES) dirs.push(process.env.DS41_OPENAI_MODULES);
  for (const p of (process.env.NODE_PATH || '').split(':')) if (p) dirs.push(p);
  dirs.push(join(root, 'build', 'npm', 'node_modules'));
  for (const d of dirs) {
    if (existsSync(join(d, name, 'package.json'))) {
      // createRequire from a file inside the parent of node_modules resolves d/<name>.
      return createRequire(join(resolve(d), '..', '__ds41_loader__.js'))(name);
    }
  }
  try {
    return createRequire(import.meta.url)(name);
  } catch {
    throw new Error(`the ${name} npm package is not installed; run tools/replay/ensure_openai.sh`);
  }
}

export function loadOpenAI() {
  return loadPackage('openai');
}

const mod = loadOpenAI();
export const OpenAI = mod.OpenAI || mod.default || mod;
export default OpenAI;
