from autogk_git.cli import main

main()
