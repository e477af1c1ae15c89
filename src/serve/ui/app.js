// SPDX-License-Identifier: Apache-2.0
// firn serve's web UI: plain ES module, no build step. Each page is a hash route that renders
// from the JSON API (/api/v1); pages that show live state poll it every few seconds.

const main = document.getElementById('main');
const nav = document.getElementById('nav');
const whoBox = document.getElementById('who');
let me = null;
let timer = null;
let pageToken = 0;

// ---- helpers -------------------------------------------------------------------------------

const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
}[c]));

// Tagged template: interpolated values are escaped unless wrapped with raw().
class Raw { constructor(s) { this.s = s; } }
const raw = (s) => new Raw(s);
function html(strings, ...values) {
  let out = strings[0];
  values.forEach((v, i) => {
    if (v instanceof Raw) out += v.s;
    else if (Array.isArray(v)) out += v.map((x) => (x instanceof Raw ? x.s : esc(x))).join('');
    else out += esc(v);
    out += strings[i + 1];
  });
  return raw(out);
}

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && me) headers['X-CSRF-Token'] = me.csrf_token;
  const r = await fetch('/api/v1' + path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
  });
  let data = null;
  if (r.status !== 204) {
    try { data = await r.json(); } catch { data = null; }
  }
  if (r.status === 401 && !path.startsWith('/session') && !path.startsWith('/setup')) {
    me = null;
    showChrome();
    if (location.hash !== '#/login') location.hash = '#/login';
  }
  return { ok: r.ok, status: r.status, data };
}

const problemText = (res) => (res.data && (res.data.detail || res.data.title)) ||
  `request failed (HTTP ${res.status})`;

function fmtTime(sec) {
  if (!sec) return '—';
  return new Date(sec * 1000).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
}
function fmtAgo(sec) {
  if (!sec) return '—';
  const d = Math.max(0, Math.round(Date.now() / 1000 - sec));
  if (d < 60) return `${d} s ago`;
  if (d < 3600) return `${Math.floor(d / 60)} min ago`;
  if (d < 86400) return `${Math.floor(d / 3600)} h ago`;
  return `${Math.floor(d / 86400)} d ago`;
}
const isoSec = (iso) => (iso ? Date.parse(iso) / 1000 : 0);
function fmtDuration(a, b) {
  if (!a) return '—';
  const d = Math.max(0, (b || Date.now() / 1000) - a);
  if (d < 60) return `${Math.round(d)} s`;
  if (d < 3600) return `${Math.floor(d / 60)} min ${Math.round(d % 60)} s`;
  return `${Math.floor(d / 3600)} h ${Math.floor((d % 3600) / 60)} min`;
}
function fmtBytes(n) {
  if (n === undefined || n === null) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${i ? v.toFixed(1) : v} ${u[i]}`;
}
const fmtNum = (n) => (n === undefined || n === null ? '—' : Number(n).toLocaleString('en-US'));
const badge = (state) => html`<span class="badge badge-${state}">${state}</span>`;
function schedText(j) {
  if (j.schedule_kind === 'interval') {
    const m = Math.round(j.interval_seconds / 60);
    return m % 60 === 0 ? `every ${m / 60} h` : `every ${m} min`;
  }
  if (j.schedule_kind === 'cron') return `cron ${j.cron} (UTC)`;
  return j.schedule_kind === 'continuous' ? 'continuous' : 'manual';
}
// The CLI's own error line of a firn check or sync output.
function errorLine(text) {
  const lines = (text || '').split('\n').filter((l) => l.startsWith('firn: '));
  return lines.length ? lines[lines.length - 1].slice(6) : '';
}

function render(content) {
  main.innerHTML = content instanceof Raw ? content.s : esc(content);
}
function setTimer(fn, ms) {
  clearInterval(timer);
  timer = setInterval(fn, ms);
}
function formData(form) {
  const o = {};
  for (const el of form.elements) {
    if (!el.name || el.disabled) continue;
    if (el.type === 'number') { if (el.value !== '') o[el.name] = Number(el.value); }
    else if (el.type === 'checkbox') o[el.name] = el.checked;
    else if (el.value !== '') o[el.name] = el.value;
  }
  return o;
}
function showError(el, msg) {
  el.innerHTML = msg ? html`<div class="alert alert-error" role="alert">${msg}</div>`.s : '';
}
function showChrome() {
  nav.hidden = !me;
  whoBox.hidden = !me;
  if (me) {
    document.getElementById('who-name').innerHTML =
      html`${me.user.username} <span class="role">${me.user.role}</span>`.s;
  }
  const newJob = nav.querySelector('[data-nav=new]');
  if (newJob) newJob.hidden = !me || me.user.role !== 'admin';
  const page = location.hash.split('/')[1] || '';
  for (const a of nav.querySelectorAll('a')) {
    const n = a.dataset.nav;
    a.classList.toggle('active', n === page || (n === 'new' && location.hash === '#/jobs/new') ||
      (n === 'overview' && (page === 'jobs' || page === 'runs') && location.hash !== '#/jobs/new'));
  }
}

// ---- setup and sign-in ---------------------------------------------------------------------

function pageSetup() {
  render(html`
  <section class="auth-card card">
    <h1>Welcome to firn</h1>
    <p class="muted">Create the administrator. The setup token was printed by
      <code>firn serve</code> when it started and is kept in <code>DATA/setup-token</code>.</p>
    <form id="f" class="form" autocomplete="off">
      <label>Setup token<input name="setup_token" required autocomplete="off"></label>
      <label>User name<input name="username" required value="admin" autocomplete="username"></label>
      <label>Password<input name="password" type="password" required minlength="12"
        autocomplete="new-password"><span class="hint">at least 12 characters</span></label>
      <label>Repeat password<input name="password2" type="password" required
        autocomplete="new-password"></label>
      <div id="err"></div>
      <button class="btn btn-primary" type="submit">Create administrator</button>
    </form>
  </section>`);
  const f = document.getElementById('f');
  f.onsubmit = async (e) => {
    e.preventDefault();
    const d = formData(f);
    if (d.password !== d.password2) {
      showError(document.getElementById('err'), 'The two passwords differ.');
      return;
    }
    delete d.password2;
    const res = await api('POST', '/setup', d);
    if (!res.ok) { showError(document.getElementById('err'), problemText(res)); return; }
    me = res.data;
    showChrome();
    location.hash = '#/overview';
  };
}

function pageLogin() {
  render(html`
  <section class="auth-card card">
    <h1>Sign in</h1>
    <form id="f" class="form">
      <label>User name<input name="username" required autocomplete="username"></label>
      <label>Password<input name="password" type="password" required
        autocomplete="current-password"></label>
      <div id="err"></div>
      <button class="btn btn-primary" type="submit">Sign in</button>
    </form>
  </section>`);
  const f = document.getElementById('f');
  f.onsubmit = async (e) => {
    e.preventDefault();
    const res = await api('POST', '/session', formData(f));
    if (!res.ok) { showError(document.getElementById('err'), problemText(res)); return; }
    me = res.data;
    showChrome();
    location.hash = '#/overview';
  };
}

// ---- overview ------------------------------------------------------------------------------

async function pageOverview(token) {
  const res = await api('GET', '/jobs');
  if (token !== pageToken || !res.ok) return;
  const jobs = res.data.items;
  const count = (s) => jobs.filter((j) => j.state === s).length;
  const rows = jobs.map((j) => {
    const st = j.stats || {};
    const lastCommit = isoSec(st.last_commit_at);
    return html`<tr>
      <td><a href="#/jobs/${j.id}" class="strong">${j.name}</a>
        <div class="sub">${j.source_name} → ${j.destination_name}</div></td>
      <td>${badge(j.state)}</td>
      <td>${schedText(j)}</td>
      <td class="num">${st.rows_per_second !== undefined ? Number(st.rows_per_second).toFixed(1) : '—'}</td>
      <td class="num">${fmtBytes(st.lag_bytes)}</td>
      <td title="${st.last_commit_at || ''}">${lastCommit ? fmtAgo(lastCommit) : '—'}</td>
      <td class="err-cell">${j.last_error ? html`<span class="text-error" title="${j.last_error}">${j.last_error}</span>` : '—'}</td>
      <td class="actions">${me.user.role === 'viewer' ? '' : j.state === 'running'
        ? html`<button class="btn btn-sm" data-stop="${j.id}">Stop</button>`
        : html`<button class="btn btn-sm btn-primary" data-run="${j.id}">Run</button>`}</td>
    </tr>`;
  });
  render(html`
  <div class="page-head"><h1>Overview</h1>
    ${me.user.role === 'admin' ? html`<a class="btn btn-primary" href="#/jobs/new">New job</a>` : ''}</div>
  <div class="stats">
    <div class="stat card"><div class="stat-n">${jobs.length}</div><div class="stat-l">jobs</div></div>
    <div class="stat card"><div class="stat-n ${count('running') ? 'text-running' : ''}">${count('running')}</div><div class="stat-l">running</div></div>
    <div class="stat card"><div class="stat-n ${count('failing') ? 'text-error' : ''}">${count('failing')}</div><div class="stat-l">failing</div></div>
    <div class="stat card"><div class="stat-n">${count('paused')}</div><div class="stat-l">paused</div></div>
  </div>
  <div id="err"></div>
  <div class="card table-card">
  ${jobs.length ? html`<table class="table" id="jobs">
    <thead><tr><th>Job</th><th>State</th><th>Schedule</th><th class="num">Rows/s</th>
      <th class="num">Lag</th><th>Last commit</th><th>Last error</th><th></th></tr></thead>
    <tbody>${rows}</tbody></table>`
    : html`<div class="empty">No jobs yet. Add a <a href="#/sources">source</a> and a
      <a href="#/destinations">destination</a>, then <a href="#/jobs/new">create a job</a>.</div>`}
  </div>`);
  bindRunStop(() => pageOverview(pageToken));
}

function bindRunStop(refresh) {
  for (const b of main.querySelectorAll('[data-run],[data-stop]')) {
    b.onclick = async () => {
      b.disabled = true;
      const id = b.dataset.run || b.dataset.stop;
      const res = await api('POST', `/jobs/${id}/${b.dataset.run ? 'run' : 'stop'}`);
      if (!res.ok) showError(document.getElementById('err'), problemText(res));
      else refresh();
    };
  }
}

// ---- sources and destinations --------------------------------------------------------------

const KINDS = {
  sources: {
    title: 'Sources', one: 'source',
    cols: [['Host', (c) => `${c.host}:${c.port || 5432}`], ['Database', (c) => c.database],
      ['User', (c) => c.username], ['TLS', (c) => c.sslmode || 'prefer']],
    form: () => html`
      <label>Name<input name="name" required placeholder="shop-primary"></label>
      <div class="row2">
        <label>Host<input name="host" required placeholder="db.internal"></label>
        <label>Port<input name="port" type="number" min="1" max="65535" placeholder="5432"></label>
      </div>
      <div class="row2">
        <label>Database<input name="database" required></label>
        <label>User<input name="username" required autocomplete="off"></label>
      </div>
      <div class="row2">
        <label>Password<input name="password" type="password" autocomplete="new-password"
          placeholder="stored encrypted, never shown again"></label>
        <label>TLS (sslmode)<select name="sslmode">
          ${['prefer', 'disable', 'allow', 'require', 'verify-ca', 'verify-full'].map((m) => html`<option>${m}</option>`)}
        </select></label>
      </div>`,
  },
  destinations: {
    title: 'Destinations', one: 'destination',
    cols: [['Catalog', (c) => (c.catalog_type === 'rest' ? 'REST' : 'SQL (SQLite)')],
      ['Location', (c) => (c.catalog_type === 'rest' ? c.catalog_uri : c.warehouse)],
      ['Namespace', (c) => c.namespace || '{database}_{schema}']],
    form: () => html`
      <label>Name<input name="name" required placeholder="lake"></label>
      <div class="row2">
        <label>Catalog<select name="catalog_type" id="ctype">
          <option value="sql">SQL catalog (embedded SQLite)</option>
          <option value="rest">REST catalog</option></select></label>
        <label>Namespace<input name="namespace" placeholder="{database}_{schema}"></label>
      </div>
      <label>Warehouse<input name="warehouse" placeholder="/var/lib/firn/warehouse or s3://bucket/path">
        <span class="hint">a folder, s3:// or gs:// location (SQL catalog: required)</span></label>
      <label>Catalog URI<input name="catalog_uri" placeholder="sqlite:///var/lib/firn/catalog.db or https://catalog.example/">
        <span class="hint">SQL: the SQLite file (default: in the warehouse); REST: the catalog's URL</span></label>
      <div class="row2">
        <label>Catalog name<input name="catalog_name" placeholder="firn"></label>
        <label>Catalog token<input name="token" type="password" autocomplete="off"
          placeholder="REST bearer token (optional)"></label>
      </div>
      <details class="more"><summary>Object storage (S3-compatible)</summary>
        <div class="row2">
          <label>Endpoint<input name="storage_endpoint" placeholder="https://s3.example"></label>
          <label>Region<input name="storage_region" placeholder="us-east-1"></label>
        </div>
        <div class="row2">
          <label>Access key id<input name="access_key_id" autocomplete="off"></label>
          <label>Secret access key<input name="secret_access_key" type="password" autocomplete="off"></label>
        </div>
      </details>`,
  },
};

async function pageResources(kind, token) {
  const K = KINDS[kind];
  const res = await api('GET', `/${kind}`);
  if (token !== pageToken || !res.ok) return;
  const items = res.data.items;
  const admin = me.user.role === 'admin';
  const rows = items.map((it) => html`<tr data-id="${it.id}">
      <td class="strong">${it.name}</td>
      ${K.cols.map(([, f]) => html`<td>${f(it.config)}</td>`)}
      <td>${it.config.secrets_set.length ? it.config.secrets_set.join(', ') : '—'}</td>
      <td class="actions">
        ${me.user.role !== 'viewer' ? html`<button class="btn btn-sm" data-test="${it.id}">Test connection</button>` : ''}
        ${admin ? html`<button class="btn btn-sm btn-ghost" data-del="${it.id}">Delete</button>` : ''}
      </td></tr>
      <tr class="result-row" id="result-${it.id}" hidden><td colspan="${K.cols.length + 3}"></td></tr>`);
  render(html`
  <div class="page-head"><h1>${K.title}</h1></div>
  <div id="err"></div>
  <div class="card table-card">
  ${items.length ? html`<table class="table" id="list">
    <thead><tr><th>Name</th>${K.cols.map(([t]) => html`<th>${t}</th>`)}<th>Secrets set</th><th></th></tr></thead>
    <tbody>${rows}</tbody></table>`
    : html`<div class="empty">No ${K.one} yet.</div>`}
  </div>
  ${admin ? html`<section class="card form-card">
    <h2>Add a ${K.one}</h2>
    <form id="f" class="form" novalidate>${K.form()}
      <div id="ferr"></div>
      <button class="btn btn-primary" type="submit">Save ${K.one}</button>
    </form></section>` : ''}`);
  for (const b of main.querySelectorAll('[data-test]')) {
    b.onclick = async () => {
      const row = document.getElementById(`result-${b.dataset.test}`);
      row.hidden = false;
      row.firstElementChild.innerHTML = html`<span class="spinner"></span> Testing…`.s;
      b.disabled = true;
      const r = await api('POST', `/${kind}/${b.dataset.test}/test`);
      b.disabled = false;
      if (!r.ok) {
        row.firstElementChild.innerHTML = html`<div class="alert alert-error">${problemText(r)}</div>`.s;
        return;
      }
      const line = errorLine(r.data.output);
      row.firstElementChild.innerHTML = (r.data.ok
        ? html`<div class="alert alert-ok test-result">✓ Connection OK</div>`
        : html`<div class="alert alert-error test-result">✗ ${line || `firn check exited with code ${r.data.exit_code}`}</div>`).s +
        html`<details><summary>Output of firn check</summary><pre class="log small">${r.data.output}</pre></details>`.s;
    };
  }
  for (const b of main.querySelectorAll('[data-del]')) {
    b.onclick = async () => {
      if (!confirm(`Delete this ${K.one}?`)) return;
      const r = await api('DELETE', `/${kind}/${b.dataset.del}`);
      if (!r.ok) showError(document.getElementById('err'), problemText(r));
      else pageResources(kind, pageToken);
    };
  }
  const f = document.getElementById('f');
  if (f) {
    f.onsubmit = async (e) => {
      e.preventDefault();
      const r = await api('POST', `/${kind}`, formData(f));
      if (!r.ok) { showError(document.getElementById('ferr'), problemText(r)); return; }
      pageResources(kind, pageToken);
    };
  }
}

// ---- job wizard --------------------------------------------------------------------------

// The mode a new table starts with: a copy then CDC where the table allows it (firn's default).
const defaultMode = (t) => ((t.sync_modes || []).includes('full_refresh_cdc') ? 'full_refresh_cdc'
  : (t.sync_modes || [])[0]);

async function pageNewJob(token) {
  const [srcs, dsts] = await Promise.all([api('GET', '/sources'), api('GET', '/destinations')]);
  if (token !== pageToken || !srcs.ok || !dsts.ok) return;
  const s = srcs.data.items;
  const d = dsts.data.items;
  if (!s.length || !d.length) {
    render(html`<div class="page-head"><h1>New job</h1></div>
      <div class="card empty">A job copies a <a href="#/sources">source</a> into a
      <a href="#/destinations">destination</a>: add ${!s.length ? 'a source' : ''}${!s.length && !d.length ? ' and ' : ''}${!d.length ? 'a destination' : ''} first.</div>`);
    return;
  }
  render(html`
  <div class="page-head"><h1>New job</h1></div>
  <form id="f" class="wizard">
    <section class="card form-card"><h2><span class="step">1</span> Source and destination</h2>
      <div class="form">
        <label>Job name<input name="name" required placeholder="shop-to-lake"></label>
        <div class="row2">
          <label>Source<select name="source_id" id="src">${s.map((x) => html`<option value="${x.id}">${x.name}</option>`)}</select></label>
          <label>Destination<select name="destination_id">${d.map((x) => html`<option value="${x.id}">${x.name}</option>`)}</select></label>
        </div>
      </div>
    </section>
    <section class="card form-card"><h2><span class="step">2</span> Tables</h2>
      <p class="muted">Tables are read from the source with <code>firn discover</code>.</p>
      <button class="btn" type="button" id="load">Load tables</button>
      <div id="terr"></div>
      <div id="tables"></div>
    </section>
    <section class="card form-card"><h2><span class="step">3</span> Schedule</h2>
      <div class="radios">
        <label class="radio"><input type="radio" name="kind" value="manual" checked> Manual: runs when you press Run</label>
        <label class="radio"><input type="radio" name="kind" value="interval"> Every
          <input type="number" id="every" min="1" value="60" class="inline-num"> minutes (catch-up runs)</label>
        <label class="radio"><input type="radio" name="kind" value="cron"> Cron (UTC)
          <input id="cron" class="inline-text mono" value="0 * * * *" aria-label="cron expression"></label>
        <div id="cron-preview" class="sub cron-preview"></div>
        <label class="radio"><input type="radio" name="kind" value="continuous"> Continuous: stream changes all the time (<code>firn sync --follow</code>)</label>
      </div>
    </section>
    <div id="err"></div>
    <div class="form-foot"><button class="btn btn-primary" type="submit">Create job</button></div>
  </form>`);
  let found = [];
  const cronBox = document.getElementById('cron');
  const preview = document.getElementById('cron-preview');
  let cronTimer = null;
  const showPreview = async () => {
    const r = await api('POST', '/cron-preview', { cron: cronBox.value });
    preview.innerHTML = (r.ok
      ? html`Next runs: <span id="next-runs">${r.data.next_runs.map(fmtTime).join(' · ')}</span>`
      : html`<span class="text-error" role="alert">${problemText(r)}</span>`).s;
  };
  cronBox.oninput = () => { clearTimeout(cronTimer); cronTimer = setTimeout(showPreview, 250); };
  cronBox.onfocus = () => { f.querySelector('input[value=cron]').checked = true; };
  showPreview();
  document.getElementById('load').onclick = async (e) => {
    const b = e.target;
    b.disabled = true;
    const box = document.getElementById('tables');
    box.innerHTML = html`<p><span class="spinner"></span> Discovering tables…</p>`.s;
    showError(document.getElementById('terr'), '');
    const r = await api('POST', `/sources/${document.getElementById('src').value}/discover`);
    b.disabled = false;
    if (!r.ok) { box.innerHTML = ''; showError(document.getElementById('terr'), problemText(r)); return; }
    found = r.data.tables;
    box.innerHTML = html`<table class="table" id="picker">
      <thead><tr><th class="check"><input type="checkbox" id="all" aria-label="select all"></th><th>Table</th>
        <th>Primary key</th><th>Sync mode</th><th>Notes</th></tr></thead>
      <tbody>${found.map((t, i) => html`<tr>
        <td><input type="checkbox" data-i="${i}" aria-label="select ${t.namespace}.${t.name}"></td>
        <td class="strong">${t.namespace}.${t.name}</td>
        <td>${(t.primary_key || []).join(', ') || html`<span class="muted">none</span>`}</td>
        <td><select data-mode="${i}" aria-label="sync mode of ${t.namespace}.${t.name}">${(t.sync_modes || []).map((m) => html`<option ${m === defaultMode(t) ? 'selected' : ''}>${m}</option>`)}</select></td>
        <td class="sub">${(t.notes || []).join(' ')}</td></tr>`)}</tbody></table>`.s;
    document.getElementById('all').onchange = (ev) => {
      for (const c of box.querySelectorAll('input[data-i]')) c.checked = ev.target.checked;
    };
  };
  const f = document.getElementById('f');
  f.onsubmit = async (e) => {
    e.preventDefault();
    const err = document.getElementById('err');
    const picked = [...f.querySelectorAll('input[data-i]:checked')].map((c) => {
      const t = found[Number(c.dataset.i)];
      const mode = f.querySelector(`select[data-mode="${c.dataset.i}"]`).value;
      return { namespace: t.namespace, name: t.name, sync_mode: mode };
    });
    if (!picked.length) { showError(err, 'Pick at least one table (Load tables, then tick them).'); return; }
    showError(err, '');
    const kind = f.querySelector('input[name=kind]:checked').value;
    const schedule = { kind };
    if (kind === 'interval') schedule.interval_seconds = Math.round(Number(document.getElementById('every').value) * 60);
    if (kind === 'cron') schedule.cron = cronBox.value;
    const body = {
      name: f.elements.name.value, source_id: Number(f.elements.source_id.value),
      destination_id: Number(f.elements.destination_id.value), tables: picked, schedule,
    };
    const btn = f.querySelector('button[type=submit]');
    btn.disabled = true;
    const r = await api('POST', '/jobs', body);
    btn.disabled = false;
    if (!r.ok) { showError(err, problemText(r)); return; }
    location.hash = `#/jobs/${r.data.id}`;
  };
}

// ---- job detail ----------------------------------------------------------------------------

async function pageJob(id, token) {
  const [jr, rr] = await Promise.all([api('GET', `/jobs/${id}`), api('GET', `/jobs/${id}/runs?limit=20`)]);
  if (token !== pageToken) return;
  if (!jr.ok) { render(html`<div class="alert alert-error">${problemText(jr)}</div>`); return; }
  const j = jr.data;
  const st = j.stats || {};
  const running = j.state === 'running';
  const canWrite = me.user.role !== 'viewer';
  const streams = j.streams || [];
  const tableRows = streams.map((s) => {
    const bf = s.backfill || {};
    const pct = bf.done ? 100 : (bf.percent ?? null);
    return html`<tr>
      <td class="strong">${s.stream}</td><td>${s.table}</td><td>${s.sync_mode}</td>
      <td class="num rows-written">${fmtNum(s.rows_written)}</td><td class="num">${fmtNum(s.changes_read)}</td>
      <td class="num">${fmtNum(s.commits)}</td>
      <td>${pct === null ? '—' : html`<div class="progress" title="${pct}%"><div style="width:${Math.min(100, pct)}%"></div></div><span class="sub">${bf.done ? 'done' : `${Number(pct).toFixed(0)} %`}</span>`}</td>
      <td title="${s.last_commit_at || ''}">${s.last_commit_at ? fmtAgo(isoSec(s.last_commit_at)) : '—'}</td></tr>`;
  });
  const runs = rr.ok ? rr.data.items : [];
  render(html`
  <div class="page-head">
    <div><h1>${j.name} ${badge(j.state)}</h1>
      <div class="sub">${j.source_name} → ${j.destination_name} · ${schedText(j)}</div></div>
    <div class="btns">${canWrite ? html`
      ${running ? html`<button class="btn" data-stop="${j.id}">Stop</button>`
        : html`<button class="btn btn-primary" data-run="${j.id}">Run now</button>`}
      ${!running && j.schedule_kind !== 'manual' ? (j.paused
        ? html`<button class="btn" id="resume">Resume schedule</button>`
        : html`<button class="btn" id="pause">Pause schedule</button>`) : ''}
      ${me.user.role === 'admin' && !running ? html`<button class="btn btn-ghost" id="del">Delete</button>` : ''}` : ''}
    </div>
  </div>
  <div id="err"></div>
  ${j.last_error && j.state === 'failing' ? html`<div class="alert alert-error">Last run failed: ${j.last_error}</div>` : ''}
  <div class="grid4">
    <div class="kv card"><div class="k">Phase</div><div class="v" id="phase">${st.phase || '—'}</div></div>
    <div class="kv card"><div class="k">Rows written (last run)</div><div class="v">${fmtNum(st.rows_written)}</div></div>
    <div class="kv card"><div class="k">Rows/s</div><div class="v">${st.rows_per_second !== undefined ? Number(st.rows_per_second).toFixed(1) : '—'}</div></div>
    <div class="kv card"><div class="k">Lag</div><div class="v">${fmtBytes(st.lag_bytes)}</div></div>
    <div class="kv card"><div class="k">Last commit</div><div class="v" title="${st.last_commit_at || ''}">${st.last_commit_at ? fmtAgo(isoSec(st.last_commit_at)) : '—'}</div></div>
    <div class="kv card"><div class="k">Acknowledged LSN</div><div class="v mono">${st.acknowledged_lsn || '—'}</div></div>
    <div class="kv card"><div class="k">Next runs (UTC)</div><div class="v small" id="job-next-runs">${j.next_runs.length && !j.paused ? j.next_runs.map((t) => fmtTime(t).slice(5, 16)).join(' · ') : '—'}</div></div>
    <div class="kv card"><div class="k">Files (for the CLI)</div><div class="v mono small" title="${j.folder}">${j.folder}</div></div>
  </div>
  <section class="card table-card"><h2>Tables</h2>
    ${streams.length ? html`<table class="table" id="tables">
      <thead><tr><th>Stream</th><th>Iceberg table</th><th>Mode</th><th class="num">Rows written</th>
      <th class="num">Changes read</th><th class="num">Commits</th><th>Backfill</th><th>Last commit</th></tr></thead>
      <tbody>${tableRows}</tbody></table>`
      : html`<div class="empty">Selected: ${j.tables.map((t) => `${t.namespace}.${t.name}`).join(', ')}. Figures appear once a run has started.</div>`}
  </section>
  <section class="card table-card"><h2>Runs</h2>
    ${runs.length ? html`<table class="table" id="runs">
      <thead><tr><th>Run</th><th>Trigger</th><th>State</th><th>Started</th><th>Duration</th>
      <th class="num">Exit</th><th>Error</th></tr></thead>
      <tbody>${runs.map((r) => html`<tr>
        <td><a href="#/runs/${r.id}">#${r.id}</a></td><td>${r.trigger}</td><td>${badge(r.state)}</td>
        <td title="${fmtTime(r.started_at)}">${fmtAgo(r.started_at)}</td>
        <td>${fmtDuration(r.started_at, r.ended_at)}</td><td class="num">${r.exit_code ?? '—'}</td>
        <td class="err-cell">${r.error ? html`<span class="text-error" title="${r.error}">${r.error}</span>` : ''}</td></tr>`)}</tbody></table>`
      : html`<div class="empty">No runs yet.</div>`}
  </section>`);
  const refresh = () => pageJob(id, pageToken);
  bindRunStop(refresh);
  const patch = async (body) => {
    const r = await api('PATCH', `/jobs/${id}`, body);
    if (!r.ok) showError(document.getElementById('err'), problemText(r));
    else refresh();
  };
  const p = document.getElementById('pause');
  if (p) p.onclick = () => patch({ paused: true });
  const rs = document.getElementById('resume');
  if (rs) rs.onclick = () => patch({ paused: false });
  const del = document.getElementById('del');
  if (del) {
    del.onclick = async () => {
      if (!confirm('Delete this job? Its Iceberg tables and its folder stay.')) return;
      const r = await api('DELETE', `/jobs/${id}`);
      if (!r.ok) showError(document.getElementById('err'), problemText(r));
      else location.hash = '#/overview';
    };
  }
}

// ---- run and its log -----------------------------------------------------------------------

const LOG_PAGE = 65536;

async function pageRun(id, token) {
  const rr = await api('GET', `/runs/${id}`);
  if (token !== pageToken) return;
  if (!rr.ok) { render(html`<div class="alert alert-error">${problemText(rr)}</div>`); return; }
  const r = rr.data;
  render(html`
  <div class="page-head"><div><h1>Run #${r.id} ${badge(r.state)}</h1>
    <div class="sub">job <a href="#/jobs/${r.job_id}">${r.job_name}</a> · ${r.trigger} ·
      started ${fmtTime(r.started_at)} · ${fmtDuration(r.started_at, r.ended_at)}${r.exit_code !== null ? ` · exit ${r.exit_code}` : ''}</div></div></div>
  ${r.error ? html`<div class="alert alert-error">${r.error}</div>` : ''}
  <section class="card"><div class="log-head"><h2>Log</h2>
    <span class="sub" id="logsize"></span>
    <button class="btn btn-sm" id="older" hidden>Load older</button></div>
    <pre class="log" id="log"></pre></section>`);
  const pre = document.getElementById('log');
  const older = document.getElementById('older');
  let start = 0;
  let end = 0;
  const first = await api('GET', `/runs/${id}/logs?limit=${LOG_PAGE}`);
  if (token !== pageToken || !first.ok) return;
  pre.textContent = first.data.text;
  start = first.data.offset;
  end = first.data.end;
  const size = (n) => { document.getElementById('logsize').textContent = `${fmtBytes(n)} · showing from byte ${fmtNum(start)}`; };
  size(first.data.size);
  older.hidden = start === 0;
  pre.scrollTop = pre.scrollHeight;
  older.onclick = async () => {
    const from = Math.max(0, start - LOG_PAGE);
    const page = await api('GET', `/runs/${id}/logs?offset=${from}&limit=${start - from}`);
    if (!page.ok) return;
    pre.textContent = page.data.text + pre.textContent;
    start = from;
    older.hidden = start === 0;
    size(page.data.size);
  };
  if (r.state === 'running') {
    setTimer(async () => {
      if (token !== pageToken) return;
      const more = await api('GET', `/runs/${id}/logs?offset=${end}&limit=${LOG_PAGE}`);
      if (!more.ok) return;
      const atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.textContent += more.data.text;
      end = more.data.end;
      size(more.data.size);
      if (atBottom) pre.scrollTop = pre.scrollHeight;
      const now = await api('GET', `/runs/${id}`);
      if (now.ok && now.data.state !== 'running') route();
    }, 2000);
  }
}

// ---- settings: users and API tokens ---------------------------------------------------------

async function pageSettings(token) {
  const admin = me.user.role === 'admin';
  const [users, tokens] = await Promise.all([admin ? api('GET', '/users') : null, api('GET', '/tokens')]);
  if (token !== pageToken) return;
  render(html`
  <div class="page-head"><h1>Settings</h1></div>
  ${admin && users.ok ? html`<section class="card table-card"><h2>Users</h2>
    <table class="table" id="users"><thead><tr><th>User</th><th>Role</th><th>Created</th><th></th></tr></thead>
    <tbody>${users.data.items.map((u) => html`<tr><td class="strong">${u.username}</td><td>${badge(u.role)}</td>
      <td>${fmtTime(u.created_at)}</td><td class="actions">${u.id !== me.user.id
        ? html`<button class="btn btn-sm btn-ghost" data-deluser="${u.id}">Delete</button>` : ''}</td></tr>`)}</tbody></table></section>
  <section class="card form-card"><h2>Add a user</h2>
    <form id="uf" class="form" novalidate>
      <div class="row2"><label>User name<input name="username" autocomplete="off"></label>
        <label>Role<select name="role"><option value="viewer">viewer: reads everything</option>
          <option value="operator">operator: runs, stops and tests</option>
          <option value="admin">admin: everything</option></select></label></div>
      <label>Password<input name="password" type="password" autocomplete="new-password" placeholder="at least 12 characters"></label>
      <div id="uerr"></div>
      <button class="btn btn-primary" type="submit">Add user</button>
    </form></section>` : ''}
  <section class="card table-card"><h2>API tokens</h2>
    ${tokens.ok && tokens.data.items.length ? html`<table class="table" id="tokens"><thead><tr><th>Name</th><th>Created</th><th>Last used</th><th></th></tr></thead>
    <tbody>${tokens.data.items.map((t) => html`<tr><td class="strong">${t.name}</td><td>${fmtTime(t.created_at)}</td>
      <td>${t.last_used_at ? fmtAgo(t.last_used_at) : 'never'}</td>
      <td class="actions"><button class="btn btn-sm btn-ghost" data-deltoken="${t.id}">Revoke</button></td></tr>`)}</tbody></table>`
    : html`<div class="empty">No API tokens. A token acts as you, sent as <code>Authorization: Bearer …</code>.</div>`}
  </section>
  <section class="card form-card"><h2>New API token</h2>
    <form id="tf" class="form" novalidate><label>Name<input name="name" placeholder="ci"></label>
      <div id="terr"></div><button class="btn btn-primary" type="submit">Create token</button></form>
  </section>`);
  const again = () => pageSettings(pageToken);
  const uf = document.getElementById('uf');
  if (uf) {
    uf.onsubmit = async (e) => {
      e.preventDefault();
      const r = await api('POST', '/users', formData(uf));
      if (!r.ok) showError(document.getElementById('uerr'), problemText(r));
      else again();
    };
  }
  document.getElementById('tf').onsubmit = async (e) => {
    e.preventDefault();
    const r = await api('POST', '/tokens', formData(document.getElementById('tf')));
    const box = document.getElementById('terr');
    if (!r.ok) { showError(box, problemText(r)); return; }
    await again();
    document.getElementById('terr').innerHTML = html`<div class="alert alert-ok">Token created; copy it now, it is not shown again:
      <code id="new-token">${r.data.token}</code></div>`.s;
  };
  for (const b of main.querySelectorAll('[data-deluser],[data-deltoken]')) {
    b.onclick = async () => {
      const path = b.dataset.deluser ? `/users/${b.dataset.deluser}` : `/tokens/${b.dataset.deltoken}`;
      const r = await api('DELETE', path);
      if (r.ok) again();
    };
  }
}

// ---- router --------------------------------------------------------------------------------

async function route() {
  clearInterval(timer);
  const token = ++pageToken;
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  if (!me && parts[0] !== 'setup' && parts[0] !== 'login') {
    const setup = await api('GET', '/setup');
    if (setup.ok && setup.data.needed) { location.hash = '#/setup'; return; }
    const who = await api('GET', '/me');
    if (!who.ok) { location.hash = '#/login'; return; }
    me = who.data;
  }
  showChrome();
  switch (parts[0]) {
    case 'setup': return pageSetup();
    case 'login': return pageLogin();
    case 'sources': return pageResources('sources', token);
    case 'destinations': return pageResources('destinations', token);
    case 'jobs':
      if (parts[1] === 'new') return pageNewJob(token);
      await pageJob(Number(parts[1]), token);
      setTimer(() => { if (token === pageToken) pageJob(Number(parts[1]), token); }, 3000);
      return undefined;
    case 'runs': return pageRun(Number(parts[1]), token);
    case 'settings': return pageSettings(token);
    default:
      if (parts[0] !== 'overview') { location.hash = '#/overview'; return undefined; }
      await pageOverview(token);
      setTimer(() => { if (token === pageToken) pageOverview(token); }, 3000);
      return undefined;
  }
}

document.getElementById('logout').onclick = async () => {
  await api('DELETE', '/session');
  me = null;
  showChrome();
  location.hash = '#/login';
};
window.addEventListener('hashchange', route);
route();
