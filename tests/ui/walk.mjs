// SPDX-License-Identifier: Apache-2.0
// Walks firn serve's pages in a real browser (Debian chromium driven by playwright-core, no
// browser download): first-run setup, a wrong password shown inline, sign-in, a source tested
// green and one tested red with the server's message, a destination, the job wizard with the
// table picker, Run now until the run succeeded and the page's rows-written equals the
// source's count, the run's log, the overview. Asserts on page content (waiting for it, never
// on timing), expects no script errors in the console (the API's 4xx answers the walk provokes
// are logged by the browser as failed loads and do not count) and saves a screenshot of each page into FIRN_UI_SHOTS.
//
// Environment: FIRN_UI_URL, FIRN_UI_TOKEN (setup token), FIRN_UI_PG (JSON: host, port,
// database, username), FIRN_UI_DEST (folder for the warehouse and catalog), FIRN_UI_ROWS (the
// source table's count), FIRN_UI_SHOTS, FIRN_UI_NODE (folder with node_modules/playwright-core),
// FIRN_UI_CHROMIUM (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import assert from 'node:assert/strict';

const env = process.env;
const require = createRequire(`${env.FIRN_UI_NODE}/`);
const { chromium } = require('playwright-core');

const url = env.FIRN_UI_URL;
const pg = JSON.parse(env.FIRN_UI_PG);
const shots = env.FIRN_UI_SHOTS;
mkdirSync(shots, { recursive: true });
const PASSWORD = 'correct horse battery staple';
const LONG = 240000; // generous upper bound for a run; the checks are on content

const browser = await chromium.launch({
  executablePath: env.FIRN_UI_CHROMIUM || '/usr/bin/chromium',
  args: ['--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--no-first-run', '--disable-quic', '--disable-dev-shm-usage'],
});
const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
const consoleErrors = [];
page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
page.on('pageerror', (e) => consoleErrors.push(String(e)));
const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const step = (s) => console.log(`step: ${s}`);

try {
  step('setup');
  await page.goto(url);
  await page.getByRole('heading', { name: 'Welcome to firn' }).waitFor();
  await shot('01-setup');
  await page.getByLabel('Setup token').fill(env.FIRN_UI_TOKEN);
  await page.getByLabel('User name').fill('admin');
  await page.locator('input[name=password]').fill(PASSWORD);
  await page.getByLabel('Repeat password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create administrator' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await page.getByText('No jobs yet').waitFor();
  await shot('02-overview-empty');

  step('sign out, wrong password, sign in');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.getByLabel('User name').fill('admin');
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'wrong user name or password' }).waitFor();
  await shot('03-login-wrong-password');
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();

  step('sources');
  await page.getByRole('link', { name: 'Sources' }).click();
  await page.getByRole('heading', { name: 'Add a source' }).waitFor();
  const addSource = async (name, database) => {
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('Host').fill(pg.host);
    await page.getByLabel('Port').fill(String(pg.port));
    await page.getByLabel('Database').fill(database);
    await page.getByLabel('User', { exact: true }).fill(pg.username);
    await page.getByLabel('TLS (sslmode)').selectOption('disable');
    await page.getByRole('button', { name: 'Save source' }).click();
    await page.locator('#list td.strong', { hasText: name }).waitFor();
  };
  // an invalid field is shown inline, and nothing is saved
  await page.getByLabel('Name').fill('broken');
  await page.getByLabel('Host').fill('h');
  await page.getByLabel('Database').fill('d');
  await page.getByLabel('User', { exact: true }).fill('u');
  await page.getByLabel('Port').fill('70000');
  await page.getByRole('button', { name: 'Save source' }).click();
  await page.getByRole('alert').filter({ hasText: '"port" must be a number 1-65535' }).waitFor();
  await page.getByLabel('Port').fill('');
  await page.reload();
  await page.getByRole('heading', { name: 'Add a source' }).waitFor();
  await addSource('shop', pg.database);
  await addSource('missing-db', 'no_such_database');
  const rowOf = (name) => page.locator('#list tr', { has: page.locator('td.strong', { hasText: name }) });
  await rowOf('shop').getByRole('button', { name: 'Test connection' }).click();
  await page.locator('.test-result', { hasText: 'Connection OK' }).waitFor({ timeout: LONG });
  await rowOf('missing-db').getByRole('button', { name: 'Test connection' }).click();
  await page.locator('.test-result.alert-error', { hasText: 'database "no_such_database" does not exist' })
    .waitFor({ timeout: LONG });
  await shot('04-sources-tested');

  step('destination');
  await page.getByRole('link', { name: 'Destinations' }).click();
  await page.getByRole('heading', { name: 'Add a destination' }).waitFor();
  const field = (name) => page.locator(`#f [name=${name}]`);
  await field('name').fill('lake');
  await field('namespace').fill('lake');
  await field('warehouse').fill(`${env.FIRN_UI_DEST}/warehouse`);
  await field('catalog_uri').fill(`sqlite:///${env.FIRN_UI_DEST}/catalog.db`);
  await page.getByRole('button', { name: 'Save destination' }).click();
  await page.locator('#list td.strong', { hasText: 'lake' }).waitFor();
  await page.getByRole('button', { name: 'Test connection' }).click();
  await page.locator('.test-result', { hasText: 'Connection OK' }).waitFor({ timeout: LONG });
  await shot('05-destinations');

  step('job wizard');
  await page.getByRole('link', { name: 'New job' }).first().click();
  await page.getByRole('heading', { name: 'New job' }).waitFor();
  await page.getByLabel('Job name').fill('shop-to-lake');
  await page.getByLabel('Source').selectOption({ label: 'shop' });
  await page.getByRole('button', { name: 'Create job' }).click();
  await page.getByRole('alert').filter({ hasText: 'Pick at least one table' }).waitFor();
  await page.getByRole('button', { name: 'Load tables' }).click();
  await page.locator('#picker').waitFor({ timeout: LONG });
  await page.getByLabel('select public.items').check();
  // a cron schedule: an invalid one is refused inline, a valid one shows the server's next runs
  const cron = page.getByLabel('cron expression');
  await cron.fill('61 * * * *');
  await page.locator('#cron-preview [role=alert]', { hasText: 'the minute field "61" is not valid' }).waitFor();
  await cron.fill('*/30 * * * *');
  await page.locator('#next-runs').waitFor();
  const next = (await page.locator('#next-runs').textContent()).split(' · ');
  assert.equal(next.length, 3, `three next runs: ${next}`);
  for (const t of next) assert.match(t, /^\d{4}-\d\d-\d\d \d\d:(00|30):00 UTC$/);
  await shot('06-job-wizard');
  await page.getByLabel('Manual: runs when you press Run').check();
  await page.getByRole('button', { name: 'Create job' }).click();
  await page.getByRole('heading', { name: /shop-to-lake/ }).waitFor({ timeout: LONG });

  step('run');
  await page.getByRole('button', { name: 'Run now' }).click();
  await page.locator('#runs .badge-succeeded').first().waitFor({ timeout: LONG });
  await page.locator('#tables .rows-written', { hasText: Number(env.FIRN_UI_ROWS).toLocaleString('en-US') })
    .waitFor({ timeout: LONG });
  await page.locator('#phase', { hasText: 'finished' }).waitFor({ timeout: LONG });
  await shot('07-job-detail');

  step('run log');
  await page.locator('#runs a').first().click();
  await page.getByRole('heading', { name: /Run #/ }).waitFor();
  await page.locator('#log', { hasText: 'firn' }).waitFor();
  const log = await page.locator('#log').textContent();
  assert.ok(log.length > 0, 'the run log is empty');
  await shot('08-run-log');

  step('settings');
  await page.getByRole('link', { name: 'Settings' }).click();
  await page.getByRole('heading', { name: 'Add a user' }).waitFor();
  await page.locator('#uf [name=username]').fill('vic');
  await page.locator('#uf [name=role]').selectOption('viewer');
  await page.locator('#uf [name=password]').fill('short');
  await page.getByRole('button', { name: 'Add user' }).click();
  await page.getByRole('alert').filter({ hasText: 'at least 12 characters' }).waitFor();
  await page.locator('#uf [name=password]').fill(PASSWORD);
  await page.getByRole('button', { name: 'Add user' }).click();
  await page.locator('#users td', { hasText: 'vic' }).waitFor();
  await shot('09-settings');

  step('overview');
  await page.getByRole('link', { name: 'Overview' }).click();
  await page.locator('#jobs td', { hasText: 'shop-to-lake' }).waitFor();
  await page.locator('#jobs .badge-idle').waitFor();
  await shot('10-overview');
  // a viewer sees the job but no button that changes anything
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('User name').fill('vic');
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#jobs td', { hasText: 'shop-to-lake' }).waitFor();
  await page.locator('#jobs a', { hasText: 'shop-to-lake' }).click();
  await page.locator('#runs .badge-succeeded').first().waitFor();
  assert.equal(await page.getByRole('button', { name: 'Run now' }).count(), 0, 'viewer sees Run now');
  assert.equal(await page.getByRole('button', { name: 'Delete' }).count(), 0, 'viewer sees Delete');
  await shot('11-viewer-job');
  assert.deepEqual(consoleErrors.filter((e) => !e.startsWith('Failed to load resource')), [], 'console errors');
  console.log('walk: ok');
} catch (e) {
  await shot('99-failure').catch(() => {});
  console.error(`walk: failed: ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
