from codemod.cli import main

main()
