// The extension's code runs in three places: the MV3 service worker, extension pages, and (page/) the
// web pages themselves. All are browser globals plus `chrome`; everything is an ES module but page/.
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["**/*.js"],
    languageOptions: {
      ecmaVersion: 2025,
      sourceType: "module",
      globals: { ...globals.browser, ...globals.serviceworker, chrome: "readonly" },
    },
    rules: {
      "no-unused-vars": ["error", { argsIgnorePattern: "^_", caughtErrors: "none" }],
      eqeqeq: ["error", "smart"],
      "no-implicit-globals": "error",
    },
  },
  {
    files: ["**/page/**/*.js"],
    languageOptions: { sourceType: "script" },
  },
];
