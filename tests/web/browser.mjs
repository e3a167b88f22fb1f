// browser.mjs: the headless chromium (Debian's, driven by playwright-core from tests/api/node_modules)
// and the page the web tests share. STRATA_CHROMIUM names the browser (run.sh sets it).
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(path.join(process.env.NODE_PATH ?? '', 'x'));
const { chromium } = require('playwright-core');

// A browser and one 1200x760 page whose script errors fail the test.
export async function openPage() {
  const browser = await chromium.launch({
    executablePath: process.env.STRATA_CHROMIUM ?? '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage',
      '--no-first-run', '--disable-extensions', '--disable-sync', '--metrics-recording-only', '--mute-audio'],
  });
  const page = await browser.newPage({ viewport: { width: 1200, height: 760 } });
  page.on('pageerror', (e) => { throw e; });
  return { browser, page };
}
