// check.mjs drives APISIX Dashboard in headless Chromium against a running gw: it lists
// routes, creates and edits an upstream pointing at a local backend, creates a route that
// names that upstream by upstream_id, edits the route's URI, and after each write checks through gw's Admin API and its
// proxy that gw serves what the dashboard wrote. A screenshot is taken after each step.
//
//   node check.mjs <dashboard url, e.g. http://127.0.0.1:19390/ui/> <gw admin host:port>
//                  <gw proxy host:port> <admin key> <screenshot dir>
// playwright-core comes from the dashboard's own node_modules (NODE_PATH, see run.sh).
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(process.env.NODE_PATH.split(':')[0] + '/');
const { chromium } = require('playwright-core');

const [dashURL, adminAddr, proxyAddr, adminKey, shotDir] = process.argv.slice(2);
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const stepTimeout = 60_000; // generous: the machine this runs on is often shared

let failures = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures++;
}

async function admin(path) {
  const res = await fetch(`http://${adminAddr}/apisix/admin${path}`, { headers: { 'X-API-KEY': adminKey } });
  return { status: res.status, body: await res.json() };
}

// The backend the dashboard's upstream points at: it answers with the path it was asked for.
const backend = http.createServer((req, res) => { res.end(`backend saw ${req.url}`); });
await new Promise((r) => backend.listen(0, '127.0.0.1', r));
const backendPort = backend.address().port;

const browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
page.setDefaultTimeout(stepTimeout);
const adminCalls = [];
page.on('response', async (res) => {
  if (!res.url().includes('/apisix/admin')) return;
  const url = new URL(res.url());
  adminCalls.push(`${res.status()} ${res.request().method()} ${url.pathname}${url.search}`);
  // A refused write is what this check exists to find: print what was sent and the answer.
  if (res.status() >= 400 && res.request().method() !== 'GET') {
    console.log(`  refused: ${res.request().method()} ${url.pathname} ${res.request().postData()}\n  -> ${res.status()} ${await res.text().catch(() => '')}`);
  }
});
const shot = (name) => page.screenshot({ path: `${shotDir}/${name}.png` });
const toast = (text) => page.getByRole('alert').filter({ hasText: text }).first().waitFor({ state: 'visible' });

try {
  // The Admin key goes into the dashboard's Settings dialog, which opens on first visit.
  await page.goto(dashURL);
  const settings = page.getByRole('dialog', { name: 'Settings' });
  await settings.waitFor();
  await page.getByLabel('Admin Key').fill(adminKey);
  await settings.getByRole('button').click();

  // 1. The route list (empty or not) renders from GET /routes.
  await page.goto(new URL('routes', dashURL).href);
  await page.getByRole('heading', { name: 'Routes' }).waitFor();
  await page.getByRole('button', { name: 'Add Route', exact: true }).waitFor();
  await page.waitForLoadState('networkidle');
  await shot('1-routes-list');
  check(adminCalls.some((c) => c.startsWith('200 GET /apisix/admin/routes')), 'route list: GET /routes answered 200');

  // 2. An upstream with one node, the local backend.
  await page.goto(new URL('upstreams/add', dashURL).href);
  await page.getByRole('heading', { name: 'Add Upstream' }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('dash-upstream');
  const nodes = page.getByRole('group', { name: 'Nodes' });
  await page.getByRole('button', { name: 'Add a Node' }).click();
  const row = nodes.locator('tr.ant-table-row').first();
  await row.getByRole('textbox').first().fill('127.0.0.1');
  await row.getByRole('spinbutton').first().fill(String(backendPort));
  await page.getByLabel('Name', { exact: true }).click(); // leaves the node table, which saves its row
  await page.getByRole('button', { name: 'Add', exact: true }).click();
  await toast('Add Upstream Successfully');
  await page.waitForURL(/\/upstreams\/detail\//);
  const upstreamId = decodeURIComponent(page.url().split('/upstreams/detail/')[1].split(/[/?]/)[0]);
  await page.getByLabel('Name', { exact: true }).waitFor();
  await shot('2-upstream-created');
  let up = await admin(`/upstreams/${upstreamId}`);
  check(up.status === 200 && up.body.value.nodes?.length === 1 && up.body.value.nodes[0].port === backendPort,
    `upstream ${upstreamId} created: ${JSON.stringify(up.body.value)}`);

  // 3. Edit the upstream: a description, saved with PUT.
  await page.getByRole('button', { name: 'Edit' }).click();
  await page.getByLabel('Description').first().fill('upstream edited in APISIX Dashboard');
  await page.getByRole('button', { name: 'Save' }).click();
  await toast('success');
  await page.getByRole('button', { name: 'Edit' }).waitFor();
  await shot('3-upstream-edited');
  up = await admin(`/upstreams/${upstreamId}`);
  check(up.body.value.desc === 'upstream edited in APISIX Dashboard' && up.body.value.nodes?.[0]?.port === backendPort,
    `upstream edited: ${JSON.stringify(up.body.value)}`);

  // 4. A route naming that upstream by id.
  await page.goto(new URL('routes/add', dashURL).href);
  await page.getByRole('heading', { name: 'Add Route' }).waitFor();
  await page.getByLabel('Name', { exact: true }).first().fill('dash-route');
  await page.getByLabel('URI', { exact: true }).fill('/dash');
  await page.getByRole('textbox', { name: 'HTTP Methods' }).click();
  await page.getByRole('option', { name: 'GET' }).click();
  await page.keyboard.press('Escape');
  await page.locator('input[name="upstream_id"]').fill(upstreamId);
  await page.getByRole('button', { name: 'Add', exact: true }).click();
  await toast('Add Route Successfully');
  await page.waitForURL(/\/routes\/detail\//);
  const routeId = decodeURIComponent(page.url().split('/routes/detail/')[1].split(/[/?]/)[0]);
  await page.getByLabel('URI', { exact: true }).waitFor();
  await shot('4-route-created');
  let route = await admin(`/routes/${routeId}`);
  check(route.status === 200 && route.body.value.upstream_id === upstreamId && route.body.value.uri === '/dash',
    `route ${routeId} created: ${JSON.stringify(route.body.value)}`);
  let proxied = await fetch(`http://${proxyAddr}/dash`).then(async (r) => `${r.status} ${await r.text()}`);
  check(proxied === '200 backend saw /dash', `proxy GET /dash: ${proxied}`);

  // 5. Edit the route: a new URI and a description.
  await page.getByRole('button', { name: 'Edit' }).click();
  await page.getByLabel('Description').first().fill('edited in APISIX Dashboard');
  await page.getByLabel('URI', { exact: true }).fill('/dash-edited');
  await page.getByRole('button', { name: 'Save' }).click();
  await toast('success');
  await page.getByRole('button', { name: 'Edit' }).waitFor();
  await shot('5-route-edited');
  route = await admin(`/routes/${routeId}`);
  check(route.body.value.uri === '/dash-edited' && route.body.value.desc === 'edited in APISIX Dashboard' &&
    route.body.value.upstream_id === upstreamId, `route edited: ${JSON.stringify(route.body.value)}`);
  proxied = await fetch(`http://${proxyAddr}/dash-edited`).then(async (r) => `${r.status} ${await r.text()}`);
  check(proxied === '200 backend saw /dash-edited', `proxy GET /dash-edited: ${proxied}`);
  const old = await fetch(`http://${proxyAddr}/dash`).then((r) => r.status);
  check(old === 404, `proxy GET /dash after the edit: ${old}`);

  // 6. Both lists show what was made.
  await page.goto(new URL('upstreams', dashURL).href);
  await page.getByRole('cell', { name: 'dash-upstream' }).waitFor();
  await shot('6-upstreams-list');
  await page.goto(new URL('routes', dashURL).href);
  await page.getByRole('cell', { name: 'dash-route' }).waitFor();
  await shot('7-routes-list');
  check(true, 'lists show dash-upstream and dash-route');
} catch (err) {
  failures++;
  console.log(`FAIL ${err.message.split('\n')[0]}`);
  await shot('failure').catch(() => {});
} finally {
  console.log('Admin API calls the dashboard made (status method path):');
  for (const c of [...new Set(adminCalls)]) console.log(`  ${c}`);
  await browser.close();
  backend.close();
}
process.exit(failures ? 1 : 0);
