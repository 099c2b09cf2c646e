import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', 'migrations/', 'bench/results/'] },
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      // Fastify handlers and store methods are async by contract even when they need no await.
      '@typescript-eslint/require-await': 'off',
      'no-restricted-syntax': ['error', { selector: 'ExportDefaultDeclaration', message: 'Use named exports.' }],
      // drizzle-orm's ES modules cost the server ~125 MB of RSS on Node 24 (see src/db/orm.ts): its
      // values come through require() there and in src/db/orm-drivers.ts; types may be imported.
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['drizzle-orm', 'drizzle-orm/*'],
              allowTypeImports: true,
              message:
                "Import drizzle-orm's values from src/db/orm.ts (or src/db/orm-drivers.ts), which loads its CommonJS build; `import type` is fine.",
            },
          ],
        },
      ],
    },
  },
  {
    files: ['src/db/orm.ts', 'src/db/orm-drivers.ts'],
    rules: { '@typescript-eslint/no-restricted-imports': 'off' },
  },
  {
    // vitest's asymmetric matchers (expect.any, expect.objectContaining) are typed `any`.
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-unsafe-assignment': 'off' },
  },
  {
    files: ['drizzle.config.ts', 'vitest.config.ts', 'eslint.config.js'],
    rules: { 'no-restricted-syntax': 'off' },
  },
  { files: ['eslint.config.js', 'src/start.mjs'], ...tseslint.configs.disableTypeChecked },
);
