// The dashboard's own Playwright config, pointed at Debian's chromium and made patient:
// one worker, no retries, 3 minutes a test (its 30 s default times out on a shared machine).
// Copy it into the apisix-dashboard source dir; see README.md here.
import { defineConfig } from '@playwright/test';

import base from './playwright.config';

export default defineConfig({
  ...base,
  reporter: [['list']],
  workers: 1,
  retries: 0,
  timeout: 180_000,
  projects: [
    {
      name: 'chromium',
      use: {
        ...base.projects![0].use,
        launchOptions: { executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] },
      },
    },
  ],
});
