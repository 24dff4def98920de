// serve.mjs serves APISIX Dashboard's built files at /ui/ and passes /apisix/admin/* to gw's
// Admin API, so the browser sees one origin: the layout APISIX itself uses when it embeds the
// dashboard on its Admin port (http://127.0.0.1:9180/ui/). The dashboard's API calls are
// relative (/apisix/admin/...), so no CORS is involved. No dependencies beyond Node.
//
//   node serve.mjs <dist dir> <listen port> <gw admin host:port>
import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const [distDir, listenPort, adminAddr] = process.argv.slice(2);
if (!distDir || !listenPort || !adminAddr) {
  console.error('usage: node serve.mjs <dist dir> <listen port> <gw admin host:port>');
  process.exit(2);
}
const [adminHost, adminPort] = adminAddr.split(':');
const contentTypes = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
  '.svg': 'image/svg+xml', '.json': 'application/json', '.woff2': 'font/woff2',
  '.png': 'image/png', '.ico': 'image/x-icon', '.ttf': 'font/ttf',
};

function serveFile(res, file) {
  res.writeHead(200, { 'content-type': contentTypes[path.extname(file)] ?? 'application/octet-stream' });
  createReadStream(file).pipe(res);
}

http.createServer((req, res) => {
  if (req.url.startsWith('/apisix/admin')) {
    const upstream = http.request(
      { host: adminHost, port: adminPort, method: req.method, path: req.url, headers: req.headers },
      (adminRes) => { res.writeHead(adminRes.statusCode, adminRes.headers); adminRes.pipe(res); });
    upstream.on('error', (err) => { res.writeHead(502); res.end(`gw admin: ${err.message}`); });
    req.pipe(upstream);
    return;
  }
  if (!req.url.startsWith('/ui')) { res.writeHead(302, { location: '/ui/' }); res.end(); return; }
  // The dashboard is a single-page app: a path that is not a file is index.html.
  const rel = decodeURIComponent(new URL(req.url, 'http://x').pathname.slice('/ui'.length));
  const file = path.join(distDir, path.normalize(rel));
  if (file.startsWith(distDir) && statSync(file, { throwIfNoEntry: false })?.isFile()) { serveFile(res, file); return; }
  serveFile(res, path.join(distDir, 'index.html'));
}).listen(Number(listenPort), '127.0.0.1', () => console.log(`dashboard on http://127.0.0.1:${listenPort}/ui/ -> gw admin ${adminAddr}`));
